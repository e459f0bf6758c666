"""The replica environment matches what Vertex AI sets (shared/reference/vertex-api.md section 3)."""

import json
import sys

import pytest

from trainhub.agent.environment import (
    NotRunnable,
    ReplicaContext,
    expand,
    replica_argv,
    replica_environment,
)


def spec(pools, base=None):
    job_spec = {"workerPoolSpecs": pools, "scheduling": {}}
    if base:
        job_spec["baseOutputDirectory"] = {"outputUriPrefix": base}
    return {"jobSpec": job_spec}


def container(command=("python3",), args=(), env=()):
    return {"containerSpec": {"imageUri": "img", "command": list(command), "args": list(args), "env": list(env)},
            "replicaCount": 1, "machineSpec": {"machineType": "n1-standard-4"}}


def context(pool_index=0, replica_index=0, hosts=None, pools=None, base=None, gpus=(0,), trial=None):
    hosts = hosts or {0: ["node-a"]}
    pools = pools or [container() for _ in range(max(hosts) + 1)]
    return ReplicaContext(job_id="123", project_number=456789, spec=spec(pools, base), pool_index=pool_index,
                          replica_index=replica_index, hosts=hosts, gpu_indices=list(gpus), trial_id=trial)


def test_single_replica_has_cluster_spec_but_no_tf_config_or_master():
    env = replica_environment(context())
    cluster = json.loads(env["CLUSTER_SPEC"])
    assert cluster["cluster"] == {"workerpool0": ["node-a:2222"]}
    assert cluster["task"] == {"type": "workerpool0", "index": 0}
    assert cluster["environment"] == "cloud"
    assert "TF_CONFIG" not in env and "MASTER_ADDR" not in env and "RANK" not in env
    assert env["CLOUD_ML_JOB_ID"] == "123"
    assert env["CLOUD_ML_PROJECT_ID"] == "456789"
    assert env["CUDA_VISIBLE_DEVICES"] == "0"


def test_multi_replica_jobs_get_tf_config_and_torch_rendezvous():
    hosts = {0: ["n0"], 1: ["n1", "n2"], 2: ["ps0"], 3: ["eval0"]}
    env = replica_environment(context(pool_index=1, replica_index=1, hosts=hosts, gpus=(0, 1, 2, 3)))
    tf = json.loads(env["TF_CONFIG"])
    assert tf["cluster"] == {"chief": ["n0:2222"], "worker": ["n1:2222", "n2:2222"], "ps": ["ps0:2222"]}
    assert tf["task"]["type"] == "worker" and tf["task"]["index"] == 1
    assert env["MASTER_ADDR"] == "n0"
    assert env["WORLD_SIZE"] == "3"
    assert env["RANK"] == "2"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert json.loads(env["CLUSTER_SPEC"])["cluster"]["workerpool3"] == ["eval0:2222"]


def test_the_primary_is_rank_zero_and_evaluators_have_no_rank():
    hosts = {0: ["n0"], 1: ["n1"], 3: ["e0"]}
    assert replica_environment(context(hosts=hosts))["RANK"] == "0"
    assert "RANK" not in replica_environment(context(pool_index=3, hosts=hosts))


def test_output_dirs_come_from_base_output_directory():
    env = replica_environment(context(base="/data/out/"))
    assert env["AIP_MODEL_DIR"] == "/data/out/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "/data/out/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "/data/out/logs/"
    trial = replica_environment(context(base="/data/out/", trial="3"))
    assert trial["AIP_MODEL_DIR"] == "/data/out/3/model/"
    assert trial["CLOUD_ML_TRIAL_ID"] == "3"
    assert "AIP_MODEL_DIR" not in replica_environment(context())


def test_user_env_and_args_expand_service_variables():
    pool = container(args=["--model_dir=$(AIP_MODEL_DIR)", "$$(AIP_MODEL_DIR)", "$(UNKNOWN)"],
                     env=[{"name": "OUT", "value": "$(AIP_MODEL_DIR)final"}])
    ctx = context(pools=[pool], base="/o/")
    env = replica_environment(ctx)
    assert env["OUT"] == "/o/model/final"
    assert replica_argv(ctx, env) == ["python3", "--model_dir=/o/model/", "$(AIP_MODEL_DIR)", "$(UNKNOWN)"]


def test_python_package_jobs_run_their_module():
    pool = {"pythonPackageSpec": {"executorImageUri": "img", "packageUris": ["p.tar.gz"], "pythonModule": "trainer.task",
                                  "args": ["--epochs", "3"]}}
    ctx = context(pools=[pool])
    assert replica_argv(ctx, replica_environment(ctx)) == [sys.executable, "-m", "trainer.task", "--epochs", "3"]


def test_a_container_without_command_cannot_run_as_a_subprocess():
    ctx = context(pools=[container(command=())])
    with pytest.raises(NotRunnable, match="ENTRYPOINT"):
        replica_argv(ctx, replica_environment(ctx))


def test_expand_leaves_unknown_references():
    assert expand("$(A)-$(B)", {"A": "1"}) == "1-$(B)"


def test_a_trial_gets_its_id_and_a_metric_file_in_its_own_working_directory():
    ctx = context(trial="3")
    env = replica_environment(ReplicaContext(**{**ctx.__dict__, "work_dir": "/work/123/workerpool0-0-0"}))
    assert env["CLOUD_ML_TRIAL_ID"] == "3"
    assert env["CLOUD_ML_HP_METRIC_FILE"] == "/work/123/workerpool0-0-0/hypertune/output.metrics"
    assert json.loads(env["CLUSTER_SPEC"])["task"]["trial"] == "3"


def test_a_job_that_is_not_a_trial_has_no_metric_file():
    ctx = context()
    env = replica_environment(ReplicaContext(**{**ctx.__dict__, "work_dir": "/work/123/workerpool0-0-0"}))
    assert "CLOUD_ML_HP_METRIC_FILE" not in env and "CLOUD_ML_TRIAL_ID" not in env


def test_cloud_storage_output_maps_under_the_nodes_storage_root_per_trial():
    ctx = context(base="gs://bucket/runs/", trial="2")
    env = replica_environment(ReplicaContext(**{**ctx.__dict__, "storage_root": "/var/trainhub/gcs"}))
    assert env["AIP_MODEL_DIR"] == "/var/trainhub/gcs/bucket/runs/2/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "/var/trainhub/gcs/bucket/runs/2/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "/var/trainhub/gcs/bucket/runs/2/logs/"


def test_a_file_uri_output_is_a_local_path():
    ctx = context(base="file:///data/out/")
    env = replica_environment(ReplicaContext(**{**ctx.__dict__, "storage_root": "/var/trainhub/gcs"}))
    assert env["AIP_MODEL_DIR"] == "/data/out/model/"


def test_the_jobs_ports_replace_the_default_ones():
    hosts = {0: ["10.0.0.1"], 1: ["10.0.0.2"]}
    default = replica_environment(context(hosts=hosts))
    assert default["MASTER_PORT"] == "29500"
    assert json.loads(default["CLUSTER_SPEC"])["cluster"]["workerpool1"] == ["10.0.0.2:2222"]
    ctx = ReplicaContext(**{**context(hosts=hosts).__dict__, "master_port": 29502, "cluster_port": 29503})
    env = replica_environment(ctx)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("10.0.0.1", "29502")
    assert json.loads(env["CLUSTER_SPEC"])["cluster"] == {"workerpool0": ["10.0.0.1:29503"],
                                                          "workerpool1": ["10.0.0.2:29503"]}
    assert json.loads(env["TF_CONFIG"])["cluster"]["worker"] == ["10.0.0.2:29503"]
