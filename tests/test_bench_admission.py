"""The admission benchmark's load is Kueue's baseline generator config (test/performance/scheduler/configs/
baseline/generator.yaml): 5 cohorts x 6 queues of quota 20, each sent 350 small, 100 medium and 50 large
workloads at their intervals. Pure functions, and one tiny run end to end; nothing here is timed."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.admission import CLASS_LABEL, KUEUE_BASELINE, arrivals, load_for, nodes_needed
from bench.agent_fleet import replica_runtime
from tests.conftest import ONCE_ON_EMBEDDED_DEFAULTS
from trainhub.catalog.machines import machine_type_get


def test_the_full_load_is_kueues_baseline_mix():
    timetable = arrivals(KUEUE_BASELINE)

    assert len(timetable) == KUEUE_BASELINE.jobs == 15_000
    assert len({a.queue for a in timetable}) == 30
    assert {a.queue.split("-q")[0] for a in timetable} == {f"kueue-c{cohort}" for cohort in range(5)}
    assert Counter(a.queue for a in timetable) == {queue: 500 for queue in KUEUE_BASELINE.queues}
    per_class = Counter((a.queue, a.workload_class.name) for a in timetable)
    assert {count for (_, name), count in per_class.items() if name == "small"} == {350}
    assert {count for (_, name), count in per_class.items() if name == "medium"} == {100}
    assert {count for (_, name), count in per_class.items() if name == "large"} == {50}
    assert KUEUE_BASELINE.nominal_quota == 20


def test_each_class_arrives_at_its_interval_and_asks_for_its_gpus_and_run_time():
    timetable = arrivals(KUEUE_BASELINE)
    queue = KUEUE_BASELINE.queues[0]
    for name, gpus, seconds, interval_ms, count in (("small", 1, "0.2", 100, 350), ("medium", 5, "0.5", 500, 100),
                                                     ("large", 20, "1", 1200, 50)):
        stream = [a for a in timetable if a.queue == queue and a.workload_class.name == name]
        assert [a.at_ms for a in stream] == [interval_ms * (k + 1) for k in range(count)]
        body = stream[0].body()
        pools = body["jobSpec"]["workerPoolSpecs"]
        assert sum(machine_type_get(p["machineSpec"]["machineType"]).fixed_gpu[1] for p in pools) == gpus
        assert all(p["replicaCount"] == 1 and p["containerSpec"]["command"] == ["sleep", seconds] for p in pools)
        assert body["labels"] == {CLASS_LABEL: name}
    assert [a.at_ms for a in timetable] == sorted(a.at_ms for a in timetable)
    assert timetable[-1].at_ms == 60_000


def test_nodes_are_enough_for_every_quota_to_fill_with_any_mix():
    # per queue: 20 small (20 x 1g), or 4 medium (4 x 4g + 4 x 1g), or 1 large (16g + 4g)
    assert nodes_needed(KUEUE_BASELINE) == {"a2-highgpu-1g": 600, "a2-highgpu-4g": 120, "a2-megagpu-16g": 30}


def test_the_quick_load_is_one_cohort_with_a_tenth_of_each_stream():
    quick = load_for(1, 10)

    assert quick.jobs == 300 and len(quick.queues) == 6
    assert [(cls.name, cls.count, cls.interval_ms) for cls in quick.classes] == [
        ("small", 35, 100), ("medium", 10, 500), ("large", 5, 1200)]
    assert load_for(5, 1) == KUEUE_BASELINE


def test_a_simulated_replica_runs_for_its_sleep_command_else_for_the_pools_time():
    def doc(command, runtime=30):
        spec = {"jobSpec": {"workerPoolSpecs": [{"containerSpec": {"command": ["true"]}},
                                                {"containerSpec": {"command": command}}]}}
        return {"simulatedRuntimeSeconds": runtime, "context": {"spec": spec, "poolIndex": 1}}

    assert replica_runtime(doc(["sleep", "0.2"])) == 0.2
    assert replica_runtime(doc(["python", "train.py"], runtime=7)) == 7.0
    assert replica_runtime(doc(["sleep", "forever"], runtime=2)) == 2.0


@ONCE_ON_EMBEDDED_DEFAULTS
def test_a_tiny_load_runs_end_to_end_on_the_deployed_processes(tmp_path):
    """Six 1-GPU jobs (one per project, each of a 1-GPU quota, so six nodes) through gunicorn, the
    long poll, a Celery worker and beat and the simulated agents: every job is admitted and finishes. A start-up that fails (a server, an agent's
    constructor) fails here in seconds instead of in a 15-minute benchmark run."""
    script = ("import json; from bench.environment import setup_django; setup_django(allow_flush=False); "
              "from dataclasses import replace; from bench.admission import admission_run, load_for; "
              "print(json.dumps(admission_run(replace(load_for(1, 350), nominal_quota=1)), default=str))")
    environ = {name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "REDIS_URL")}
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,  # noqa: S603
                         env={**environ, "TMPDIR": str(tmp_path)}, cwd=Path(__file__).resolve().parents[1],
                         check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    row = json.loads(ran.stdout.splitlines()[-1])
    assert (row["planned"], row["submitted"], row["statuses"], row["admitted"], row["finished"]) == (
        6, 6, {"200": 6}, 6, 6)
    assert not row["stopped_at_cap"] and row["quota_never_exceeded"] == "yes"
