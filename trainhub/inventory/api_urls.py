from django.urls import path

from trainhub.inventory import api

urlpatterns = [
    path("v1/nodePools/<str:pool>/joinTokens", api.JoinTokens.as_view(), name="node-pool-join-tokens"),
    path("v1/nodes", api.JoinedNodes.as_view(), name="nodes"),
    path("v1/nodes/<str:node>:revoke", api.NodeRevoke.as_view(), name="node-revoke"),
]
