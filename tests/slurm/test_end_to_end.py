"""The seed's cluster end to end over REST and a real node agent: created from its spec, accounts
added with sacctmgr, a job submitted with sbatch runs its prolog scripts, the batch script with
Slurm's environment and its epilog; a higher-tier partition's job preempts (REQUEUE) a running
lower-tier job after PreemptExemptTime; squeue, sacct and sshare show what happened."""

import datetime as dt
import time

import pytest

from tests.conftest import later
from tests.slurm.conftest import CLUSTERS, seed_spec, slurm_spec
from tests.agent.harness import agents_on
from trainhub.inventory.models import Executor, Node
from trainhub.slurm.models import JobLogLine, JobNode, JobState, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services.passes import cluster_pass

pytestmark = pytest.mark.django_db(transaction=True)
BASE = f"{CLUSTERS}/seed"


def step(agent, cluster, moment, until, limit=600):
    """Tick the agent and run a pass every step (simulated time) until ``until()`` holds."""
    for _ in range(limit):
        moment = later(moment, 0.1)
        Node.objects.filter(dedicated_to=cluster.owner_key).update(last_heartbeat=moment)
        agent.tick(now=moment)
        cluster_pass(cluster=cluster, now=moment)
        if until():
            return moment
        time.sleep(0.02)
    raise AssertionError("the cluster never got there")


def job(job_id):
    return SlurmJob.objects.get(job_id=job_id)


def lines(job_id, stream):
    return [line.text for line in JobLogLine.objects.filter(job__job_id=job_id, stream=stream).order_by("id")]


def test_the_seed_cluster_end_to_end(api, admin, slurm_pools, tmp_path):
    slurm_pools["a4"].executor = Executor.SUBPROCESS
    slurm_pools["a4"].save(update_fields=["executor"])
    body = seed_spec()
    slurm_spec(body)["partitions"].append({"id": "urgent", "node_pool_ids": ["a4"], "config": {"PriorityTier": "2"}})
    assert api("alice").post(f"{CLUSTERS}?slurmClusterId=seed", body, format="json").status_code == 200
    cluster = SlurmCluster.objects.get()
    for command in ("-i add account ml", "-i add user uma,alice account=ml"):
        assert api("alice").post(f"{BASE}:sacctmgr", {"command": command}, format="json").json()["exitCode"] == 0
    agent = agents_on(tmp_path, list(Node.objects.filter(dedicated_to=cluster.owner_key)))
    moment = dt.datetime.now(dt.UTC)

    # 1. sbatch: prolog scripts, the batch script with Slurm's environment, the epilog
    script = ("#!/bin/bash\n#SBATCH -J hello\n#SBATCH --gres=gpu:2\n#SBATCH -t 10\n"
              "echo \"$SLURM_JOB_ID $SLURM_JOB_NAME $SLURM_JOB_PARTITION $SLURM_JOB_ACCOUNT $SLURM_CLUSTER_NAME "
              "$SLURM_JOB_NODELIST $CUDA_VISIBLE_DEVICES\"\n")
    hello = api("uma").post(f"{BASE}/jobs", {"script": script}, format="json").json()["jobId"]
    moment = step(agent, cluster, moment, lambda: not JobNode.objects.filter(job__job_id=hello).exclude(
        phase=NodePhase.DONE).exists() and job(hello).state == JobState.COMPLETED)
    node = job(hello).node_list
    assert lines(hello, "prolog") == ["First prolog script running", "Second prolog script running"]
    assert lines(hello, "stdout") == [f"{hello} hello a4 ml seed {node} 0,1"]
    assert lines(hello, "epilog") == ["Epilog script running"]
    assert (tmp_path / "slurm" / "seed" / "home" / "uma" / f"slurm-{hello}.out").read_text() == (
        f"{hello} hello a4 ml seed {node} 0,1\n")

    # 2. a lower-tier job fills every GPU; the urgent partition's job preempts it after 10 minutes
    low = api("uma").post(f"{BASE}/jobs", {"sbatchArgs": ["-N", "2", "--gres=gpu:8", "--wrap", "sleep 300"]},
                          format="json").json()["jobId"]
    moment = step(agent, cluster, moment, lambda: JobNode.objects.filter(job__job_id=low,
                                                                         phase=NodePhase.RUNNING).exists())
    urgent = api("alice").post(f"{BASE}/jobs", {"sbatchArgs": ["-p", "urgent", "--gres=gpu:8", "--wrap", "echo now"]},
                               format="json").json()["jobId"]
    moment = step(agent, cluster, moment, lambda: job(urgent).reason == "Resources")
    assert job(low).state == JobState.RUNNING  # still inside PreemptExemptTime
    moment = later(moment, 11 * 60)
    moment = step(agent, cluster, moment, lambda: job(urgent).state == JobState.COMPLETED
                  and not JobNode.objects.filter(job__job_id=urgent).exclude(phase=NodePhase.DONE).exists())
    requeued = job(low)
    assert (requeued.state, requeued.restart_count, requeued.reason) == (JobState.PENDING, 1, "BeginTime")
    assert lines(urgent, "stdout") == ["now"]

    # 3. what the Slurm commands show
    squeue = api("vic").get(f"{BASE}/squeue").json()["text"].splitlines()
    assert squeue[1].split()[:5] == [str(low), "a4", "wrap", "uma", "PD"] and squeue[1].endswith("(BeginTime)")
    sacct = api("uma").get(f"{BASE}/sacct", {"duplicates": "true", "allocations": "true",
                                         "jobs": f"{hello},{low}"}).json()["text"]
    assert [line.split()[0:1] + line.split()[5:6] for line in sacct.splitlines()[2:]] == [
        [str(hello), "COMPLETED"], [str(low), "PREEMPTED"]]  # the requeued run, no extra PENDING record
    # usage (the urgent job's included) is applied at the decay thread's next run, a PriorityCalcPeriod on
    moment = step(agent, cluster, later(moment, 5 * 60), lambda: True)
    shares = {row["user"]: row for row in api("uma").get(f"{BASE}/sshare", {"all": "true"}).json()["rows"]
              if row["user"]}
    # uma ran two jobs, alice one short job: uma used more and ranks lower
    assert shares["uma"]["rawUsage"] > shares["alice"]["rawUsage"] > 0
    assert shares["uma"]["fairShare"] < shares["alice"]["fairShare"]
