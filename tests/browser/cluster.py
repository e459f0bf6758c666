"""A busy cluster for the pages the browser tests look at and photograph: four GPU pools mostly
full, jobs running, waiting (with the scheduler's reasons) and finished, quotas, and a day of
dashboard history. Everything goes through the services, except the history (bench.dashboard_history)."""

from __future__ import annotations

import datetime as dt
import random

from bench.dashboard_history import Pool, write_history
from tests.conftest import container_pool, job_body
from trainhub.inventory.models import Executor, NodeState
from trainhub.inventory.services import node_heartbeat, node_pool_ensure, node_set_state
from trainhub.jobs import services
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import quota_set, scheduler_pass

POOLS = (  # name, machine type, nodes, (accelerator, count) for N1 machines
    ("a100-pool", "a2-highgpu-1g", 6, None),
    ("h100-pool", "a3-highgpu-8g", 4, None),
    ("l4-pool", "g2-standard-12", 4, None),
    ("t4-pool", "n1-standard-4", 4, ("NVIDIA_TESLA_T4", 4)),
)
NAMES = ("llama-7b-finetune", "bert-large-pretrain", "resnet50-sweep", "vit-b16-imagenet", "whisper-small-asr",
         "t5-base-summarize", "sd-xl-lora", "gpt2-medium-distill", "mistral-7b-dpo", "yolo-v8-detect",
         "clip-vit-retrieval", "wav2vec2-ctc")
MACHINES = (("a2-highgpu-1g", None), ("a3-highgpu-8g", None), ("g2-standard-12", None),
            ("n1-standard-4", ("NVIDIA_TESLA_T4", 2)))


def _submit(cast, rng: random.Random, index: int, now: dt.datetime, *, project="alpha", strategy=None) -> CustomJob:
    machine, accelerator = MACHINES[index % len(MACHINES)]
    pool = container_pool(machine, command=["python3", "train.py"], args=[f"--run={index}"],
                          accelerator=accelerator[0] if accelerator else None,
                          count=accelerator[1] if accelerator else None)
    user = cast[rng.choice(("uma", "alice"))] if project == "alpha" else cast["mallory"]
    strategy = strategy or rng.choice(("STANDARD", "STANDARD", "FLEX_START", "SPOT"))
    if strategy == "FLEX_START" and machine == "n1-standard-4":
        strategy = "SPOT"  # T4s are not offered by the Dynamic Workload Scheduler
    scheduling = {"strategy": strategy, **({"maxWaitDuration": "0s"} if strategy == "FLEX_START" else {})}
    return services.job_submit(project=cast[project], location="us-central1", user=user, now=now,
                               body=job_body(pool, name=f"{NAMES[index % len(NAMES)]}-{index:02d}",
                                             scheduling=scheduling))


def load_busy_cluster(cast, now: dt.datetime) -> dict:
    rng = random.Random(5)
    nodes = []
    for name, machine, count, accelerator in POOLS:
        kind, gpus = accelerator or (None, None)
        pool = node_pool_ensure(name=name, machine_type=machine, node_count=count, accelerator_type=kind,
                                accelerator_count=gpus, executor=Executor.SIMULATED)
        nodes += list(pool.nodes.all())
    node_heartbeat(node_ids=[node.pk for node in nodes], now=now)
    for metric, limit in (("custom_model_training_nvidia_h100_gpus", 24), ("custom_model_training_nvidia_a100_gpus", 8),
                          ("custom_model_training_preemptible_nvidia_h100_gpus", 16),
                          ("custom_model_training_nvidia_t4_gpus", 16)):
        quota_set(project=cast["alpha"], location="us-central1", metric=metric, limit=limit, actor="browser test")
    finished = []
    for index in range(24):  # a day of finished jobs, each run on a node and ended
        began = now - dt.timedelta(hours=22 - index * 0.9)
        job = _submit(cast, rng, 100 + index, began - dt.timedelta(minutes=rng.randint(1, 40)))
        node = next(n for n in nodes if n.pool.machine_type == job.spec["jobSpec"]["workerPoolSpecs"][0][
            "machineSpec"]["machineType"])
        services.jobs_place(assignments={job.pk: {(0, 0): (node.pk, [])}}, now=began)
        replica = job.replicas.get()
        services.replica_started(replica=replica, now=began)
        ended = began + dt.timedelta(minutes=rng.randint(5, 50))
        outcome = rng.random()
        if outcome < 0.75:
            services.replica_exited(replica=replica, exit_code=0, now=ended)
        elif outcome < 0.9:
            services.replica_exited(replica=replica, exit_code=1, now=ended)
        else:
            services.job_cancel(job=job, now=ended)
            services.replica_exited(replica=replica, exit_code=-15, now=ended)
        finished.append(job)
    for index in range(14):  # fills the nodes
        _submit(cast, rng, index, now - dt.timedelta(minutes=rng.randint(5, 300)), strategy="STANDARD")
    scheduler_pass(now=now)
    for job in CustomJob.objects.filter(state="JOB_STATE_PENDING"):
        for replica in job.replicas.filter(active=True):
            services.replica_started(replica=replica, now=now)
    for index in range(14, 30):  # waits for them (a STANDARD job would soon fail with a stockout)
        _submit(cast, rng, index, now - dt.timedelta(minutes=rng.randint(1, 200)), strategy="FLEX_START")
    _submit(cast, rng, 40, now, project="beta")
    node_set_state(node=nodes[3], state=NodeState.DRAIN, reason="GPU ECC errors: draining for replacement")
    scheduler_pass(now=now)
    write_history(pools=[Pool(name, kind, gpus, busy) for name, kind, gpus, busy in (
        ("a100-pool", "NVIDIA_TESLA_A100", 6, 0.72), ("h100-pool", "NVIDIA_H100_80GB", 32, 0.85),
        ("l4-pool", "NVIDIA_L4", 4, 0.55), ("t4-pool", "NVIDIA_TESLA_T4", 16, 0.6))],
        end=now, minutes=26 * 60, waiting_scale=0.12)
    return {"nodes": nodes, "finished": finished}
