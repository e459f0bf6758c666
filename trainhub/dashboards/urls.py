from django.urls import path

from trainhub.dashboards import views

app_name = "dashboards"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("kpis", views.kpis, name="kpis"),
    path("charts/<slug:key>", views.chart, name="chart"),
    path("charts/<slug:key>.csv", views.chart_csv, name="chart_csv"),
    path("team/<slug:project>/", views.team, name="team"),
    path("team/<slug:project>/charts/<slug:key>", views.chart, name="team_chart"),
    path("team/<slug:project>/charts/<slug:key>.csv", views.chart_csv, name="team_chart_csv"),
]
