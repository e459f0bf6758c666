"""A persistent resource's life through its operations: provisioning on real inventory nodes,
RUNNING, ERROR and recovery, update, reboot, delete; never sleeping (services take ``now``)."""

import pytest

from tests.conftest import container_pool, job_body, later
from tests.resources.conftest import A100, autoscaling_pool, create, running, submit, t4_job, t4_pool
from trainhub.common.errors import ApiError
from trainhub.inventory.models import Node, NodeState
from trainhub.inventory.services import node_heartbeat
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.resources import services
from trainhub.resources.models import PersistentResource, PoolNode, ResourceOperation
from trainhub.scheduling.services import nodes_sweep_heartbeats, scheduler_pass

pytestmark = pytest.mark.django_db


def shared_t4_job():
    """The same shape as the resource's jobs, but for the shared pool."""
    return job_body(container_pool(accelerator="NVIDIA_TESLA_T4", count=1))


def resource():
    return PersistentResource.objects.get(resource_id="pr", deleted_time__isnull=True)


def held_nodes():
    return set(Node.objects.filter(dedicated_to=f"persistentResources/{resource().pk}").values_list("name", flat=True))


def test_create_answers_an_unfinished_operation_and_reserves_nothing_yet(cast, nodes, now):
    operation = create(cast, now, t4_pool(2))
    assert not operation.done
    assert operation.name == f"projects/alpha/locations/us-central1/persistentResources/pr/operations/" \
                             f"{operation.operation_id}"
    assert resource().state == "PROVISIONING"
    assert not held_nodes()


def test_provisioning_reserves_idle_nodes_and_runs_once_their_agents_answer(cast, nodes, now):
    operation = create(cast, now, t4_pool(2))
    services.persistent_resources_advance(now=now)
    operation.refresh_from_db()
    assert operation.done and operation.error is None
    assert resource().state == "RUNNING" and resource().start_time == now
    assert len(held_nodes()) == 2 and all(name.startswith("t4-") for name in held_nodes())
    assert PoolNode.objects.count() == 2


def test_nodes_without_live_agents_are_reserved_but_the_resource_waits_then_errs(cast, nodes, now, settings):
    settings.TRAINHUB_RESOURCE_PROVISIONING_TIMEOUT_SECONDS = 300
    Node.objects.update(last_heartbeat=None)
    operation = create(cast, now, t4_pool(1))
    services.persistent_resources_advance(now=later(now, 10))
    operation.refresh_from_db()
    assert resource().state == "PROVISIONING" and len(held_nodes()) == 1
    assert "Waiting for the agents of 1 node(s)" in operation.progress_message
    services.persistent_resources_advance(now=later(now, 300))
    operation.refresh_from_db()
    assert resource().state == "ERROR"
    assert operation.done and operation.error["code"] == 4
    assert "did not report a heartbeat within 300s" in resource().error["message"]


def test_a_late_agent_brings_an_errored_resource_to_running(cast, nodes, now, settings):
    settings.TRAINHUB_RESOURCE_PROVISIONING_TIMEOUT_SECONDS = 0
    Node.objects.update(last_heartbeat=None)
    create(cast, now, t4_pool(1))
    services.persistent_resources_advance(now=now)
    assert resource().state == "ERROR"
    node_heartbeat(node_ids=list(Node.objects.values_list("pk", flat=True)), now=later(now, 5))
    services.persistent_resources_advance(now=later(now, 5))
    assert resource().state == "RUNNING" and resource().error is None


def test_too_few_idle_nodes_end_the_operation_in_error_and_hold_nothing(cast, nodes, now):
    running(cast, now, t4_pool(2), resource_id="first")
    operation = create(cast, now, t4_pool(2))
    services.persistent_resources_advance(now=now)
    operation.refresh_from_db()
    assert resource().state == "ERROR" and not held_nodes()
    assert operation.error["code"] == 8
    assert operation.error["message"] == ("Resources are insufficient in region: us-central1. resource pool 't4' needs "
                                          "2 n1-standard-4 node(s) with 1 x NVIDIA_TESLA_T4 in us-central1; 1 "
                                          "available.")


def test_a_pool_the_whole_inventory_could_never_supply_is_refused_at_once(cast, nodes, now):
    with pytest.raises(ApiError) as error:
        create(cast, now, t4_pool(4), {"id": "a100", "machineSpec": dict(A100), "replicaCount": 1},
               {"id": "v100", "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_V100",
                                              "acceleratorCount": 1}, "replicaCount": 1})
    assert error.value.http_status == 400
    assert [v.field for v in error.value.violations] == ["resourcePools[0].replicaCount",
                                                         "resourcePools[2].replicaCount"]
    assert "needs 4 n1-standard-4 node(s) with 1 x NVIDIA_TESLA_T4 in us-central1; 3 available in the whole " \
           "inventory" in error.value.violations[0].description
    assert not PersistentResource.objects.exists()


def test_a_duplicate_id_is_409_already_exists_but_a_deleted_ones_id_is_free(cast, nodes, now):
    running(cast, now, t4_pool(1))
    with pytest.raises(ApiError) as error:
        create(cast, now, t4_pool(1))
    assert (error.value.http_status, error.value.status) == (409, "ALREADY_EXISTS")
    services.persistent_resource_delete(resource=resource(), now=now)
    services.persistent_resources_advance(now=now)
    assert create(cast, later(now, 1), t4_pool(1)).kind == "CREATE"


def test_the_shared_scheduler_never_uses_the_reserved_nodes(cast, nodes, now):
    running(cast, now, t4_pool(3))
    job = submit(cast, now, shared_t4_job())
    scheduler_pass(now=now)
    job.refresh_from_db()
    assert job.state == states.QUEUED


def test_a_silent_node_puts_the_resource_in_error_until_it_answers_again(pr, now, settings):
    silent = later(now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1)
    services.persistent_resources_advance(now=silent)
    assert resource().state == "ERROR"
    assert resource().error["code"] == 14 and "stopped responding" in resource().error["message"]
    node_heartbeat(node_ids=list(Node.objects.values_list("pk", flat=True)), now=silent)
    services.persistent_resources_advance(now=silent)
    assert resource().state == "RUNNING"


def test_update_grows_a_pool_with_live_idle_nodes(pr, now):
    operation = services.persistent_resource_update(resource=pr, update_mask="resourcePools.replicaCount",
                                                    body={"resourcePools": [{"id": "t4", "replicaCount": 3}]}, now=now)
    assert resource().state == "UPDATING" and not operation.done
    services.persistent_resources_advance(now=now)
    operation.refresh_from_db()
    assert operation.done and operation.error is None
    assert resource().state == "RUNNING" and len(held_nodes()) == 3
    assert resource().pools.get().replica_count == 3


def test_update_that_cannot_grow_fails_and_keeps_the_size(pr, now):
    operation = services.persistent_resource_update(resource=pr, update_mask="resourcePools.replicaCount",
                                                    body={"resourcePools": [{"id": "t4", "replicaCount": 4}]}, now=now)
    services.persistent_resources_advance(now=now)
    operation.refresh_from_db()
    assert operation.error["code"] == 8 and "keeps its previous size" in operation.error["message"]
    assert resource().state == "RUNNING" and resource().pools.get().replica_count == 2 and len(held_nodes()) == 2


def test_update_shrinks_by_giving_back_idle_nodes(pr, now):
    services.persistent_resource_update(resource=pr, update_mask="resourcePools.replicaCount",
                                        body={"resourcePools": [{"id": "t4", "replicaCount": 1}]}, now=now)
    services.persistent_resources_advance(now=now)
    assert len(held_nodes()) == 1 and Node.objects.filter(dedicated_to="", pool__name="t4").count() == 2


def test_a_pool_cannot_shrink_below_the_machines_its_jobs_use(pr, cast, now):
    submit(cast, now, t4_job(replicas=1, pools=2))
    scheduler_pass(now=now)
    with pytest.raises(ApiError) as error:
        services.persistent_resource_update(resource=pr, update_mask="resourcePools.replicaCount",
                                            body={"resourcePools": [{"id": "t4", "replicaCount": 1}]}, now=now)
    assert error.value.status == "FAILED_PRECONDITION"
    assert "has 2 machine(s) running jobs; it cannot shrink to 1" in error.value.message


def test_names_and_labels_change_at_once_with_a_finished_operation(pr, now):
    operation = services.persistent_resource_update(resource=pr, update_mask="displayName,labels",
                                                    body={"displayName": "renamed", "labels": {"team": "nlp"}}, now=now)
    assert operation.done
    assert (resource().display_name, resource().labels, resource().state) == ("renamed", {"team": "nlp"}, "RUNNING")


def test_update_is_refused_while_the_resource_is_not_running(cast, nodes, now):
    create(cast, now, t4_pool(1))
    with pytest.raises(ApiError, match="PROVISIONING; it can be updated only when RUNNING"):
        services.persistent_resource_update(resource=resource(), update_mask="displayName", body={}, now=now)


def test_reboot_loses_the_replicas_fails_their_jobs_and_comes_back_when_agents_answer(
        pr, cast, now, django_capture_on_commit_callbacks):
    job = submit(cast, now, t4_job())
    restarting = submit(cast, now, t4_job(scheduling={"restartJobOnWorkerRestart": True}))
    scheduler_pass(now=now)
    with django_capture_on_commit_callbacks(execute=True):  # the requeue happens after the commit
        operation = services.persistent_resource_reboot(resource=pr, now=later(now, 1))
    job.refresh_from_db()
    restarting.refresh_from_db()
    assert job.state == states.FAILED and "persistent resource pr was rebooted" in job.error["message"]
    assert restarting.restart_count == 1 and restarting.state == states.QUEUED
    assert resource().state == "REBOOTING"
    services.persistent_resources_advance(now=later(now, 1))
    assert resource().state == "REBOOTING"  # no heartbeat since the reboot began yet
    node_heartbeat(node_ids=list(Node.objects.values_list("pk", flat=True)), now=later(now, 2))
    services.persistent_resources_advance(now=later(now, 2))
    operation.refresh_from_db()
    assert resource().state == "RUNNING" and operation.done and operation.error is None


def test_reboot_is_refused_unless_running_or_error(cast, nodes, now):
    create(cast, now, t4_pool(1))
    with pytest.raises(ApiError) as error:
        services.persistent_resource_reboot(resource=resource(), now=now)
    assert error.value.status == "FAILED_PRECONDITION"


def test_reboot_of_an_errored_resource_without_nodes_reserves_them_again(cast, nodes, now):
    first = running(cast, now, t4_pool(3), resource_id="first")
    create(cast, now, t4_pool(2))
    services.persistent_resources_advance(now=now)
    assert resource().state == "ERROR"
    services.persistent_resource_delete(resource=first, now=now)
    services.persistent_resources_advance(now=now)
    services.persistent_resource_reboot(resource=resource(), now=later(now, 1))
    node_heartbeat(node_ids=list(Node.objects.values_list("pk", flat=True)), now=later(now, 2))
    services.persistent_resources_advance(now=later(now, 2))
    assert resource().state == "RUNNING" and len(held_nodes()) == 2


def test_delete_cancels_its_jobs_and_gives_the_nodes_back_once_their_replicas_stop(pr, cast, now):
    running_job = submit(cast, now, t4_job())
    scheduler_pass(now=now)
    queued = submit(cast, now, t4_job(replicas=1, pools=2))
    other = submit(cast, now, shared_t4_job())
    operation = services.persistent_resource_delete(resource=pr, now=now)
    for job in (running_job, queued, other):
        job.refresh_from_db()
    assert running_job.state == states.CANCELLING and queued.state == states.CANCELLED
    assert other.state == states.QUEUED
    assert PersistentResource.objects.get().state == "STOPPING"
    services.persistent_resources_advance(now=now)
    assert not operation.done and Node.objects.exclude(dedicated_to="").count() == 2
    job_services.replica_exited(replica=running_job.replicas.get(), exit_code=-15, now=later(now, 1))
    services.persistent_resources_advance(now=later(now, 1))
    operation.refresh_from_db()
    running_job.refresh_from_db()
    assert operation.done and operation.error is None
    assert running_job.state == states.CANCELLED
    assert not Node.objects.exclude(dedicated_to="").exists() and not PoolNode.objects.exists()
    assert PersistentResource.objects.get().deleted_time == later(now, 1)


def test_deleting_during_provisioning_cancels_the_create_operation(cast, nodes, now):
    create_op = create(cast, now, t4_pool(1))
    services.persistent_resource_delete(resource=resource(), now=now)
    create_op.refresh_from_db()
    assert create_op.done and create_op.error["code"] == 1
    services.persistent_resources_advance(now=now)
    assert not Node.objects.exclude(dedicated_to="").exists()
    assert ResourceOperation.objects.filter(kind="DELETE", done=True).exists()


def test_a_second_delete_is_refused(pr, now):
    services.persistent_resource_delete(resource=pr, now=now)
    with pytest.raises(ApiError, match="already being deleted"):
        services.persistent_resource_delete(resource=pr, now=now)


def test_the_heartbeat_sweep_loses_replicas_on_a_dead_resource_node(pr, cast, now, settings):
    job = submit(cast, now, t4_job())
    scheduler_pass(now=now)
    nodes_sweep_heartbeats(now=later(now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1))
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert Node.objects.filter(state=NodeState.DOWN).exists()


def test_an_autoscaling_pool_starts_at_its_replica_count(cast, nodes, now):
    running(cast, now, autoscaling_pool(1, 3, replicas=2))
    assert len(held_nodes()) == 2
