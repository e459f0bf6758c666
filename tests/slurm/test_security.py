"""Every Slurm endpoint and page refuses anonymous callers; list pages cost a constant number of
queries however many clusters, jobs or associations there are."""

import pytest
from django.utils import timezone

from tests.slurm.conftest import CLUSTERS, make_job
from trainhub.slurm.services.accounting import user_add

API = [("get", CLUSTERS), ("post", CLUSTERS), ("get", f"{CLUSTERS}/c1"), ("delete", f"{CLUSTERS}/c1"),
       ("get", f"{CLUSTERS}/c1/slurmConf"), ("post", f"{CLUSTERS}/c1:updateConfig"),
       ("post", f"{CLUSTERS}/c1:updateScripts"), ("post", f"{CLUSTERS}/c1:sacctmgr"),
       ("get", f"{CLUSTERS}/c1/jobs"), ("post", f"{CLUSTERS}/c1/jobs"), ("get", f"{CLUSTERS}/c1/jobs/1"),
       ("post", f"{CLUSTERS}/c1/jobs/1:cancel"), ("post", f"{CLUSTERS}/c1/jobs/1:hold"),
       ("post", f"{CLUSTERS}/c1/jobs/1:release"), ("post", f"{CLUSTERS}/c1/jobs/1:requeue"),
       ("post", f"{CLUSTERS}/c1/jobs/1:update"), ("get", f"{CLUSTERS}/c1/jobs/1/log"),
       *(("get", f"{CLUSTERS}/c1/{name}") for name in ("squeue", "sprio", "sshare", "sacct"))]
PAGE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"
PAGES = ["/slurm/", f"{PAGE}/", f"{PAGE}/slurm.conf", f"{PAGE}/config", f"{PAGE}/scripts/prolog",
         f"{PAGE}/partitions/a4", f"{PAGE}/queue", f"{PAGE}/priority", f"{PAGE}/fairshare", f"{PAGE}/accounting",
         f"{PAGE}/sacctmgr", f"{PAGE}/accounts", f"{PAGE}/jobs/new", f"{PAGE}/jobs/1/", f"{PAGE}/jobs/1/status",
         f"{PAGE}/jobs/1/log", f"{PAGE}/jobs/1/priority"]


def test_every_slurm_api_endpoint_refuses_anonymous_callers(client, accounts):
    make_job(accounts)
    for method, path in API:
        response = getattr(client, method)(path, content_type="application/json")
        assert response.status_code == 401, (method, path)


def test_every_slurm_page_sends_anonymous_visitors_to_login(client, accounts):
    make_job(accounts)
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), path


def test_another_projects_cluster_is_not_found_anywhere(api, client, cast, accounts):
    make_job(accounts)
    for method, path in API[2:]:
        assert getattr(api("mallory"), method)(path, format="json").status_code == 404, (method, path)
    client.force_login(cast["mallory"])
    for path in PAGES[1:]:
        assert client.get(path).status_code == 404, path


@pytest.mark.parametrize("count", [1, 20])
def test_the_queue_priority_and_cluster_pages_cost_constant_queries(client, cast, accounts, django_assert_max_num_queries,
                                                           count):
    for index in range(count):
        user_add(cluster=accounts, name=f"user{index}", accounts=["ml"], actor="test")
        make_job(accounts, user=f"user{index}", priority=index, priority_time=timezone.now())
    client.force_login(cast["alice"])
    for path, budget in ((f"{PAGE}/queue", 12), (f"{PAGE}/", 16), ("/slurm/", 8), (f"{PAGE}/accounts", 14),
                         (f"{PAGE}/accounting?allusers=on", 12), (f"{PAGE}/fairshare?all=on", 12),
                         (f"{PAGE}/priority", 10), (f"{PAGE}/priority?long=on&offset=500", 10),
                         (f"{PAGE}/accounting?allusers=on&state=PD", 12)):
        with django_assert_max_num_queries(budget):
            assert client.get(path).status_code == 200, path


def test_the_cluster_list_api_costs_constant_queries(api, admin, slurm_pools, django_assert_max_num_queries):
    from tests.slurm.conftest import seed_spec
    from trainhub.inventory.services import node_pool_ensure

    for index in range(3):
        node_pool_ensure(name=f"p{index}", machine_type="a4-highgpu-8g", node_count=1)
        node_pool_ensure(name=f"l{index}", machine_type="n1-standard-4", node_count=1)
        body = seed_spec()
        body["orchestratorSpec"]["slurmSpec"]["partitions"][0]["node_pool_ids"] = [f"p{index}"]
        body["orchestratorSpec"]["slurmSpec"]["login_node_pool_id"] = f"l{index}"
        assert api("alice").post(f"{CLUSTERS}?slurmClusterId=c{index}", body, format="json").status_code == 200
    viewer = api("vic")
    with django_assert_max_num_queries(7):
        assert len(viewer.get(CLUSTERS).json()["slurmClusters"]) == 3
