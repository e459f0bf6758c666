"""PersistentResource documents and update masks: canonical form, defaults and every bound."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainhub.resources.spec import (
    MAX_RESOURCE_POOLS,
    SpecError,
    parse_persistent_resource,
    parse_update,
    parse_update_mask,
    render_pool,
    validate_resource_id,
)

T4 = {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}


def pool(**fields):
    return {"machineSpec": dict(T4), **fields}


def fields_of(error: SpecError) -> list[str]:
    return [v.field for v in error.violations]


def test_the_seed_shape_parses_with_the_job_disk_defaults_and_a_generated_id():
    parsed = parse_persistent_resource({"display_name": "seed", "resource_pools": [
        {"machine_spec": {"machine_type": "n1-standard-4", "accelerator_type": 5, "accelerator_count": "1"},
         "replica_count": "1"}]})
    (only,) = parsed.pools
    assert only.pool_id == "n1-standard-4-nvidia-tesla-t4"
    assert only.machine_spec == T4
    assert only.disk_spec == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
    assert only.replica_count == 1 and not only.autoscaling
    assert render_pool(only)["replicaCount"] == "1"


def test_generated_ids_stay_unique_and_given_ids_are_kept():
    parsed = parse_persistent_resource({"resourcePools": [pool(replicaCount=1), pool(replicaCount=1),
                                                          pool(id="mine", replicaCount=1)]})
    assert [p.pool_id for p in parsed.pools] == ["n1-standard-4-nvidia-tesla-t4", "n1-standard-4-nvidia-tesla-t4-1",
                                                 "mine"]


def test_a_single_pool_may_be_written_as_a_mapping():
    assert len(parse_persistent_resource({"resourcePools": pool(replicaCount=2)}).pools) == 1


def test_an_autoscaling_pool_without_replica_count_starts_at_its_minimum():
    (only,) = parse_persistent_resource({"resourcePools": [pool(autoscalingSpec={"minReplicaCount": "2",
                                                                                  "maxReplicaCount": "5"})]}).pools
    assert (only.replica_count, only.min_replica_count, only.max_replica_count, only.capacity) == (2, 2, 5, 5)


@pytest.mark.parametrize("fields, field", [
    ({}, "resourcePools[0].replicaCount"),
    ({"replicaCount": 0}, "resourcePools[0].replicaCount"),
    ({"replicaCount": 1001}, "resourcePools[0].replicaCount"),
    ({"replicaCount": 1, "autoscalingSpec": {"minReplicaCount": 1}}, "resourcePools[0].autoscalingSpec"),
    ({"autoscalingSpec": {"minReplicaCount": 0, "maxReplicaCount": 3}},
     "resourcePools[0].autoscalingSpec.minReplicaCount"),
    ({"autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 1001}},
     "resourcePools[0].autoscalingSpec.maxReplicaCount"),
    ({"autoscalingSpec": {"minReplicaCount": 4, "maxReplicaCount": 3}},
     "resourcePools[0].autoscalingSpec.minReplicaCount"),
    ({"replicaCount": 1, "autoscalingSpec": {"minReplicaCount": 2, "maxReplicaCount": 3}},
     "resourcePools[0].replicaCount"),
    ({"replicaCount": 4, "autoscalingSpec": {"minReplicaCount": 2, "maxReplicaCount": 3}},
     "resourcePools[0].replicaCount"),
])
def test_counts_outside_the_bounds_are_refused_on_the_field_that_breaks_them(fields, field):
    with pytest.raises(SpecError) as error:
        parse_persistent_resource({"resourcePools": [pool(**fields)]})
    assert field in fields_of(error.value)


@given(st.integers(-5, 1010), st.integers(-5, 1010), st.integers(-5, 1010))
def test_every_accepted_pool_satisfies_zero_lt_min_le_replicas_le_max_le_1000(replicas, minimum, maximum):
    body = {"resourcePools": [pool(replicaCount=replicas, autoscalingSpec={"minReplicaCount": minimum,
                                                                           "maxReplicaCount": maximum})]}
    try:
        (parsed,) = parse_persistent_resource(body).pools
    except SpecError:
        assert not 0 < minimum <= replicas <= maximum <= 1000
    else:
        assert 0 < parsed.min_replica_count <= parsed.replica_count <= parsed.max_replica_count <= 1000


def test_every_violation_is_reported_at_once():
    with pytest.raises(SpecError) as error:
        parse_persistent_resource({"displayName": "x" * 129, "labels": {"Bad": "x"}, "resourcePools": [
            {"machineSpec": {"machineType": "n9-huge"}, "replicaCount": 1},
            pool(id="Bad_Id", replicaCount=1), {"machineSpec": dict(T4), "replicaCount": 1, "colour": "red"}]})
    assert set(fields_of(error.value)) >= {"displayName", "labels.Bad", "resourcePools[0].machineSpec.machineType",
                                           "resourcePools[1].id", "resourcePools[2].colour"}


def test_a_pool_id_used_twice_and_missing_pools_are_refused():
    with pytest.raises(SpecError) as error:
        parse_persistent_resource({"resourcePools": [pool(id="a", replicaCount=1), pool(id="a", replicaCount=1)]})
    assert "'a' is used more than once" in str(error.value)
    with pytest.raises(SpecError, match="at least one resource pool"):
        parse_persistent_resource({"resourcePools": []})


def test_more_pools_than_the_limit_are_refused_before_any_is_parsed():
    """10,000 pools of one shape took 15 s to name (each generated id tried every taken one)."""
    assert len(parse_persistent_resource({"resourcePools": [pool(replicaCount=1)] * MAX_RESOURCE_POOLS}).pools) == MAX_RESOURCE_POOLS
    with pytest.raises(SpecError, match=f"at most {MAX_RESOURCE_POOLS} resource pools") as error:
        parse_persistent_resource({"resourcePools": [pool(replicaCount=1)] * 10_000})
    assert fields_of(error.value) == ["resourcePools"]


def test_network_and_other_stored_options_are_kept():
    parsed = parse_persistent_resource({"resourcePools": [pool(replicaCount=1)],
                                        "network": "projects/1/global/networks/n"})
    assert parsed.options == {"network": "projects/1/global/networks/n"}


@pytest.mark.parametrize("value", ["pr-1", "a", "a" * 63])
def test_valid_ids_are_accepted(value):
    assert validate_resource_id(value) == value


@pytest.mark.parametrize("value", ["", "1pr", "Pr", "pr-", "a" * 64, "p_r", None])
def test_invalid_ids_are_refused(value):
    with pytest.raises(SpecError, match="persistentResourceId"):
        validate_resource_id(value)


# Updates -----------------------------------------------------------------------------------------

CURRENT = parse_persistent_resource({"resourcePools": [
    pool(id="fixed", replicaCount=2), pool(id="auto", replicaCount=2,
                                           autoscalingSpec={"minReplicaCount": 1, "maxReplicaCount": 4})]}).pools


def test_update_masks_accept_snake_case_and_refuse_other_paths_by_name():
    assert parse_update_mask("display_name,resource_pools.replica_count") == ["displayName",
                                                                              "resourcePools.replicaCount"]
    with pytest.raises(SpecError) as error:
        parse_update_mask("displayName,network,resourcePools.machineSpec")
    assert fields_of(error.value) == ["network", "resourcePools.machineSpec"]
    with pytest.raises(SpecError, match="updateMask"):
        parse_update_mask("")


def test_an_update_changes_only_what_the_mask_names():
    update = parse_update("resourcePools.replicaCount", {"displayName": "ignored", "resourcePools": [
        {"id": "fixed", "replicaCount": "3"}]}, CURRENT)
    assert update.display_name is None
    assert [(p.pool_id, p.replica_count) for p in update.pools] == [("fixed", 3), ("auto", 2)]


def test_pools_without_ids_are_matched_by_position():
    update = parse_update("resourcePools.replicaCount", {"resourcePools": [{"replicaCount": 1}]}, CURRENT)
    assert update.pools[0].replica_count == 1


def test_a_new_range_keeps_the_size_inside_it():
    update = parse_update("resourcePools.autoscalingSpec", {"resourcePools": [
        {"id": "auto", "autoscalingSpec": {"minReplicaCount": 3, "maxReplicaCount": 6}}]}, CURRENT)
    auto = update.pools[1]
    assert (auto.min_replica_count, auto.replica_count, auto.max_replica_count) == (3, 3, 6)


def test_an_empty_autoscaling_spec_turns_autoscaling_off_and_a_pool_that_omits_it_keeps_it():
    update = parse_update("resourcePools.autoscalingSpec,resourcePools.replicaCount", {"resourcePools": [
        {"id": "fixed", "replicaCount": 3}, {"id": "auto", "autoscalingSpec": {}}]}, CURRENT)
    assert update.pools[0].replica_count == 3 and not update.pools[0].autoscaling
    assert not update.pools[1].autoscaling and update.pools[1].replica_count == 2
    kept = parse_update("resourcePools.autoscalingSpec", {"resourcePools": [{"id": "auto"}]}, CURRENT)
    assert kept.pools[1].autoscaling


@pytest.mark.parametrize("body, field", [
    ({"resourcePools": [{"id": "fixed", "machineSpec": {"machineType": "n1-standard-8"}}]},
     "resourcePools[0].machineSpec"),
    ({"resourcePools": [{"id": "fixed", "diskSpec": {"bootDiskSizeGb": 200}}]}, "resourcePools[0].diskSpec"),
    ({"resourcePools": [{"id": "nope", "replicaCount": 1}]}, "resourcePools[0].id"),
    ({"resourcePools": [{"id": ["not", "a", "string"], "replicaCount": 1}]}, "resourcePools[0].id"),
    ({"resourcePools": ["not a pool"]}, "resourcePools[0]"),
    ({"resourcePools": [{}, {}, {"replicaCount": 1}]}, "resourcePools[2]"),
    ({"resourcePools": [{"id": "auto", "autoscalingSpec": {"minReplicaCount": 3, "maxReplicaCount": 2}}]},
     "resourcePools[0].autoscalingSpec.minReplicaCount"),
    ({}, "resourcePools"),
])
def test_updates_that_break_a_rule_are_refused_naming_the_field(body, field):
    with pytest.raises(SpecError) as error:
        parse_update("resourcePools", body, CURRENT)
    assert field in fields_of(error.value)


def test_a_single_bound_can_change_alone():
    update = parse_update("resourcePools.autoscalingSpec.maxReplicaCount", {"resourcePools": [
        {"id": "auto", "autoscalingSpec": {"maxReplicaCount": 8}}]}, CURRENT)
    assert (update.pools[1].min_replica_count, update.pools[1].max_replica_count) == (1, 8)
    with pytest.raises(SpecError, match="needs both"):
        parse_update("resourcePools.autoscalingSpec.maxReplicaCount", {"resourcePools": [
            {"id": "fixed", "autoscalingSpec": {"maxReplicaCount": 8}}]}, CURRENT)
