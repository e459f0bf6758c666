"""Node features and sbatch -C/--constraint: the expression parser (Slurm 22.05's accepted and refused
forms, fixtures/22.05/constraint), node selection by features, slurm.conf's Features=, the admin API
that sets them and sbatch's answers over REST."""

import datetime as dt

import pytest

from tests.slurm.conftest import CLUSTERS, JOBS, run_pass, sbatch
from trainhub.slurm.conf import ClusterLayout, NodeSpec, parse_config, parse_partition_options, render_slurm_conf
from trainhub.slurm.features import (
    INVALID_FEATURE,
    TOO_LONG,
    FeatureError,
    parse_constraint,
    parse_node_features,
)
from trainhub.slurm.models import ClusterAuditEntry, JobState, SlurmCluster, SlurmJob
from trainhub.slurm.scheduler import NodeState, PendingJob, Resources, Snapshot, schedule
from trainhub.slurm.slurmconf import cluster_slurm_conf

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
FAILED = "sbatch: error: Batch job submission failed: "


@pytest.mark.parametrize(("text", "stored"), [
    ("a100", "a100"), ("a100&ib", "a100&ib"), ("a100,ib", "a100&ib"), ("a100|v100", "a100|v100"),
    ("a100&", "a100&"), ("", ""), ("[a100|v100]", "[a100|v100]"), ("a100*2", "a100*2"),
    ("[rack1*1&rack2*2]", "[rack1*1&rack2*2]"), ("(a100|v100)&ib", "(a100|v100)&ib"), ("(a100)", "(a100)"),
    ("[(a100|v100)]", "[(a100|v100)]"), ("(a100|v100)*2", "(a100|v100)*2"), ("[a100|v100]&ib", "[a100|v100]&ib"),
    ("a100*1|v100*1", "a100*1|v100*1"), ("[a100]", "[a100]"), ("[a100*2]", "[a100*2]"),
])
def test_slurm_accepts_and_stores_these(text, stored):
    assert parse_constraint(text).text == stored


@pytest.mark.parametrize("text", [
    "a100&&ib", "|a100", "&a100", "a100|&ib", "(a100", "!a100", "a100 ib",
    # fixtures/22.05/constraint-syntax/bad-*
    "((a100|v100))&ib", "[a100&ib]", "[a100|v100", "a100|v100]", "[[a100|v100]]", "a100*", "a100*x", "a100*0",
    "[a100*2|v100*2]", "(a100|v100", "a100|v100)", "[]", "[a100|v100]&[rack1|rack2]", "(a100|)",
])
def test_bad_syntax_is_slurms_invalid_feature_specification(text):
    with pytest.raises(FeatureError) as error:
        parse_constraint(text)
    assert str(error.value) == INVALID_FEATURE


def test_an_overlong_constraint_is_slurms_too_long():
    parse_constraint("a" * 1024)
    with pytest.raises(FeatureError) as error:
        parse_constraint("a" * 1025)
    assert str(error.value) == TOO_LONG


@pytest.mark.parametrize(("text", "features", "satisfied"), [
    ("a100", {"a100", "ib"}, True), ("a100", {"v100"}, False), ("", set(), True),
    ("a100&ib", {"a100"}, False), ("a100&ib", {"a100", "ib"}, True),
    ("a100|v100", {"v100"}, True), ("a100|v100", {"h100"}, False),
    # left to right, no precedence: (a100 & ib) | v100
    ("a100&ib|v100", {"v100"}, True), ("v100|a100&ib", {"v100"}, False),
    # parentheses group first; a matching OR's node needs one alternative
    ("v100|(a100&ib)", {"v100"}, True), ("(a100|v100)&ib", {"v100"}, False), ("[a100|v100]&ib", {"v100", "ib"}, True),
])
def test_a_node_satisfies_the_constraint_by_its_features(text, features, satisfied):
    assert parse_constraint(text).may_use(features) is satisfied


#: fixtures/22.05/constraint-syntax.sh's nodes, best first as the scheduler orders idle ones (by name)
HARNESS = [("gpu1", frozenset({"a100", "ib", "rack1"})), ("gpu2", frozenset({"a100", "rack1"})),
           ("gpu3", frozenset({"v100", "ib", "rack2"})), ("gpu4", frozenset({"h100", "rack2"}))]


@pytest.mark.parametrize(("text", "nodes", "placed"), [
    # fixtures/22.05/constraint-syntax/<name>-squeue.txt
    ("[a100|v100]", 2, ["gpu1", "gpu2"]), ("[v100|a100]", 1, ["gpu3"]), ("[a100|v100]", 3, None),
    ("[rack2|rack1]", 2, ["gpu3", "gpu4"]), ("[a100|v100]&ib", 2, None), ("[(a100|v100)]", 1, ["gpu1"]),
    ("a100*2", 1, ["gpu1", "gpu2"]), ("a100*2", 3, ["gpu1", "gpu2", "gpu3"]), ("a100*3", 1, None),
    ("a100*1&ib", 2, ["gpu1", "gpu2"]), ("a100*1|v100*1", 1, None), ("(a100|v100)*2", 1, ["gpu1", "gpu2"]),
    ("[rack1*1&rack2*2]", 1, ["gpu1", "gpu3", "gpu4"]), ("[rack1*2&rack2*2]", 4, ["gpu1", "gpu2", "gpu3", "gpu4"]),
    ("[rack1*3&rack2*1]", 1, None), ("[a100|v100]&rack1*1", 1, ["gpu1"]),
    ("(a100|v100)&ib", 1, ["gpu1"]), ("(a100|v100)&ib", 2, ["gpu1", "gpu3"]), ("(a100|v100)&ib", 3, None),
    ("ib&(v100|h100)", 2, None), ("(a100&rack1)|(v100&ib)", 2, ["gpu1", "gpu2"]),
])
def test_the_nodes_a_constraint_picks_are_slurms(text, nodes, placed):
    constraint = parse_constraint(text)
    assert constraint.choose(HARNESS, constraint.node_count(nodes)) == placed


def test_a_matching_or_takes_the_first_alternative_with_room_and_counts_raise_the_node_count():
    # constraint-syntax/wait-mor-squeue.txt: gpu3, the only v100 node, is busy: [v100|a100] runs on gpu2
    assert parse_constraint("[v100|a100]").choose(HARNESS[1:2] + HARNESS[3:], 1) == ["gpu2"]
    assert (parse_constraint("a100*2").node_count(1), parse_constraint("[a*1&b*2]").node_count(5)) == (2, 5)
    # -w nodes are placed first and count towards the counts they meet
    assert parse_constraint("a100*1").choose(HARNESS, 2, frozenset({"gpu2"})) == ["gpu2", "gpu1"]
    assert parse_constraint("a100*1").choose(HARNESS, 2, frozenset({"gpu4"})) == ["gpu1", "gpu4"]
    assert parse_constraint("a100*2").choose(HARNESS, 2, frozenset({"gpu4"})) is None
    assert parse_constraint("[a100|v100]").choose(HARNESS, 2, frozenset({"gpu3"})) is None


def test_node_feature_lists():
    assert parse_node_features(" a100, ib,a100,") == ("a100", "ib")
    assert parse_node_features("") == ()
    with pytest.raises(FeatureError):
        parse_node_features("a100&ib")
    with pytest.raises(FeatureError):
        parse_node_features("a," * 600)


def _snapshot(*jobs, usable=True):
    one = Resources(cpus=1)
    node_list = [NodeState("n0", cpus=4, memory_mb=0), NodeState("n1", cpus=4, memory_mb=0, features=frozenset({"ib"})),
                 NodeState("n2", cpus=4, memory_mb=0, features=frozenset({"a100", "ib"}), usable=usable)]
    return Snapshot(nodes=node_list, partitions={"p": ("n0", "n1", "n2")},
                    partition_options={"p": parse_partition_options({})},
                    running=[], pending=[PendingJob(job_id, "p", 100, NOW, per_node=one, constraint=constraint)
                                         for job_id, constraint in jobs])


def test_a_job_only_gets_nodes_with_its_features():
    plan = schedule(_snapshot((1, parse_constraint("a100&ib")), (2, parse_constraint("ib")), (3, None)),
                    parse_config({}), NOW)
    placed = {start.job_id: start.nodes for start in plan.starts}
    assert placed[1] == ("n2",)
    assert placed[2][0] in ("n1", "n2") and placed[3][0] in ("n0", "n1", "n2")


def test_features_only_on_a_drained_node_wait_with_req_node_not_avail_and_block_nobody():
    plan = schedule(_snapshot((1, parse_constraint("a100")), (2, None), usable=False), parse_config({}), NOW)
    assert plan.waiting[1].reason == "ReqNodeNotAvail, UnavailableNodes:n2"
    assert [start.job_id for start in plan.starts] == [2]
    plan = schedule(_snapshot((1, parse_constraint("tpu"))), parse_config({}), NOW)
    assert plan.waiting[1].reason == "BadConstraints"


def test_slurm_conf_names_the_features():
    nodes = (NodeSpec("gpu1", 16, 1000, features=("a100", "ib")), NodeSpec("gpu2", 16, 1000, features=("a100", "ib")),
             NodeSpec("gpu3", 16, 1000))
    text = render_slurm_conf(ClusterLayout("c", nodes, ()), parse_config({}))
    assert "NodeName=gpu[1-2] CPUs=16 RealMemory=1000 Features=a100,ib State=UNKNOWN" in text
    assert "NodeName=gpu3 CPUs=16 RealMemory=1000 State=UNKNOWN" in text


NODE = f"{CLUSTERS}/c1/nodes/a4-1"


def test_an_admin_sets_features_and_jobs_follow_them(api, admin, accounts):
    assert api("uma").patch(NODE, {"availableFeatures": "a100"}, format="json").status_code == 403
    response = api("alice").patch(NODE, {"availableFeatures": "a100,ib", "activeFeatures": "a100"}, format="json")
    assert response.status_code == 200, response.content
    node = next(n for n in response.json()["nodes"] if n["name"] == "a4-1")
    assert (node["availableFeatures"], node["activeFeatures"]) == (["a100", "ib"], ["a100"])
    assert ClusterAuditEntry.objects.filter(subject="features of node a4-1").exists()
    cluster = SlurmCluster.objects.get(pk=accounts.pk)
    assert "Features=a100,ib" in cluster_slurm_conf(cluster)
    job = sbatch(api, "uma", "-C", "a100", "--gres=gpu:1", "--wrap", "true").json()["job"]
    assert job["features"] == "a100"
    other = sbatch(api, "uma", "--gres=gpu:8", "--wrap", "true").json()["jobId"]
    # ib is available, so a valid feature, but active nowhere: no node can take the job
    assert sbatch(api, "uma", "-C", "ib", "--wrap", "true").json()["error"]["message"] == (
        FAILED + "Requested node configuration is not available")
    run_pass(cluster)
    assert (_node_of(job["jobId"]), _node_of(other)) == ("a4-1", "a4-0")
    text = api("uma").get(f"{CLUSTERS}/c1/squeue", {"format": "%i|%f"}).json()["text"]
    assert sorted(text.splitlines()[1:]) == sorted([f"{job['jobId']}|a100", f"{other}|(null)"])


def _node_of(job_id):
    return SlurmJob.objects.get(job_id=job_id).node_list


def test_bad_feature_input_is_a_400_naming_the_field(api, admin, accounts):
    def field_of(body):
        response = api("alice").patch(NODE, body, format="json")
        assert response.status_code == 400, response.content
        return {v["field"]: v["description"] for v in response.json()["error"]["details"][0]["fieldViolations"]}

    assert field_of({"availableFeatures": "a100", "activeFeatures": "v100"}) == {
        "activeFeatures": "Active features not subset of available features"}
    assert "availableFeatures" in field_of({"availableFeatures": "a&b"})
    assert "availableFeatures" in field_of({"activeFeatures": "a"})
    assert "availableFeatures" in field_of({"availableFeatures": 3})
    assert "colour" in field_of({"availableFeatures": "a", "colour": "red"})
    assert api("alice").patch(f"{CLUSTERS}/c1/nodes/nope", {"availableFeatures": "a"}, format="json").status_code == 404


@pytest.mark.parametrize(("constraint", "message"), [
    ("tpu", INVALID_FEATURE), ("a100&&ib", INVALID_FEATURE), ("|a100", INVALID_FEATURE), ("a" * 2000, TOO_LONG),
])
def test_sbatch_refuses_bad_constraints_with_slurms_message(api, admin, accounts, constraint, message):
    api("alice").patch(NODE, {"availableFeatures": "a100,ib"}, format="json")
    response = sbatch(api, "uma", f"--constraint={constraint}", "--wrap", "true")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == FAILED + message


def test_unheld_jobs_no_node_can_hold_are_refused_held_ones_accepted(api, admin, accounts):
    api("alice").patch(NODE, {"availableFeatures": "a100"}, format="json")
    api("alice").patch(f"{CLUSTERS}/c1/nodes/a4-0", {"availableFeatures": "v100"}, format="json")
    assert sbatch(api, "uma", "-C", "a100&v100", "--wrap", "true").json()["error"]["message"] == (
        FAILED + "Requested node configuration is not available")
    assert sbatch(api, "uma", "-N", "2", "-C", "a100", "--wrap", "true").status_code == 400
    held = sbatch(api, "uma", "-H", "-C", "a100&v100", "--wrap", "true").json()["job"]
    assert (held["features"], held["state"]) == ("a100&v100", JobState.PENDING)
    assert api("uma").get(JOBS).status_code == 200


PAGE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


def test_admins_set_features_on_the_cluster_page(browser, admin, accounts):
    assert browser("uma").post(f"{PAGE}/nodes/a4-0/features", {"available": "a100"}).status_code == 403
    browser("alice").post(f"{PAGE}/nodes/a4-0/features", {"available": "a100,ib", "active": "a100"})
    assert SlurmCluster.objects.get(pk=accounts.pk).node_features == {
        "a4-0": {"available": ["a100", "ib"], "active": ["a100"]}}
    page = browser("alice").get(f"{PAGE}/").content.decode()
    assert "a100,ib" in page and "(active: a100)" in page
    response = browser("alice").post(f"{PAGE}/nodes/a4-0/features", {"available": "a100", "active": "v100"},
                                     follow=True)
    assert "Active features not subset of available features" in response.content.decode()
    assert browser("alice").post(f"{PAGE}/nodes/a4-0/features", {"available": "a" * 2000}).status_code == 302
    assert browser("alice").post(f"{PAGE}/nodes/nope/features", {"available": "a"}).status_code == 404
