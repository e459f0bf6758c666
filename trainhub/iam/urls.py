from django.urls import path

from trainhub.iam import views

app_name = "iam"

urlpatterns = [
    path("token", views.token, name="token"),
    path("token/create", views.token_create, name="token_create"),
    path("token/rotate", views.token_rotate, name="token_rotate"),
]
