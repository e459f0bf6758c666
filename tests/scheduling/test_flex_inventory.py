"""A FLEX_START gang that the location's whole inventory (idle, busy or down) could never hold at
once is refused at create with a 400 naming the worker pools and the node pools, instead of
waiting for nothing (and holding a reservation of every idle node after the threshold)."""

from tests.conftest import container_pool, job_body
from trainhub.jobs.models import CustomJob

BASE = "/v1/projects/alpha/locations/{}/customJobs"


def a100_gang(nodes, strategy="FLEX_START"):
    pool = container_pool("a2-highgpu-1g", accelerator="NVIDIA_TESLA_A100", count=1)
    pools = [pool] + ([{**pool, "replicaCount": nodes - 1}] if nodes > 1 else [])
    return job_body(*pools, scheduling={"strategy": strategy})


def test_a_gang_larger_than_the_pool_is_refused_naming_the_pools(api, nodes):
    response = api("uma").post(BASE.format("us-central1"), a100_gang(3), format="json")
    assert response.status_code == 400, response.content
    violations = response.json()["error"]["details"][0]["fieldViolations"]
    assert [v["field"] for v in violations] == ["jobSpec.workerPoolSpecs[0].replicaCount",
                                                "jobSpec.workerPoolSpecs[1].replicaCount"]
    assert ("the job needs 3 a2-highgpu-1g node(s) with 1 x NVIDIA_TESLA_A100 at once; node pool(s) a100 in "
            "us-central1 have 2 in all (idle or not), so it could never start") == violations[0]["description"]
    assert not CustomJob.objects.exists()


def test_busy_or_down_nodes_count_as_inventory(api, nodes, offline_a100):
    assert api("uma").post(BASE.format("us-central1"), a100_gang(8), format="json").status_code == 200
    assert api("uma").post(BASE.format("us-central1"), a100_gang(9), format="json").status_code == 400


def test_a_location_without_such_nodes_is_named(api, nodes):
    response = api("uma").post(BASE.format("europe-west4"), a100_gang(1), format="json")
    assert response.status_code == 400
    assert "europe-west4 has none" in response.json()["error"]["message"]


def test_a_gang_that_fits_and_other_strategies_are_accepted(api, nodes):
    assert api("uma").post(BASE.format("us-central1"), a100_gang(2), format="json").status_code == 200
    # STANDARD fails with Vertex's stockout after its retry window; SPOT waits for spare capacity.
    assert api("uma").post(BASE.format("us-central1"), a100_gang(3, "STANDARD"), format="json").status_code == 200
