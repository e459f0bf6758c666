"""bench/slurm_vs_real finds the Slurm harness through its pointer file, and goes on without it; it
counts the CPU of the harness's slurmctld beside the commands', measures trainhub only once the
harness's daemons are idle again, and alternates the two sides' sbatch rounds."""

import json
import subprocess
import sys
import time

from bench import slurm_vs_real
from bench.slurm_vs_real import _slurmctld, harness_environment, harness_settled


def test_without_a_harness_pointer_real_slurm_is_not_available(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert harness_environment() is None


def test_a_pointer_to_a_harness_that_does_not_answer_is_not_available(tmp_path, monkeypatch):
    state = tmp_path / "slurmh.gone"
    state.mkdir()
    (state / "env.sh").write_text(f"export SLURM_CONF='{state}/slurm.conf'\nexport SLURMH_NODES=4\n")
    (tmp_path / "slurm-harness.current").write_text(f"{state}\n")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert harness_environment() is None


def test_the_slurmctld_counted_is_the_one_the_harness_started(tmp_path):
    (tmp_path / "pids").write_text("munged 11\nslurmctld 42\nslurmd.gpu1 43\n")
    assert _slurmctld({"SLURMH_STATE": str(tmp_path)}) == [42]


def test_trainhub_is_measured_once_the_harness_daemons_are_idle_again(tmp_path):
    """A daemon still busy (as slurmdbd recording 10,000 cancellations) is waited for; an idle one is not."""
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.time() + 2\nwhile time.time() < end: pass\ntime.sleep(60)"])
    idle = subprocess.Popen(["sleep", "60"])
    (tmp_path / "pids").write_text(f"slurmdbd {busy.pid}\nmariadbd {idle.pid}\n")
    try:
        waited = harness_settled({"SLURMH_STATE": str(tmp_path)})
    finally:
        busy.kill(), idle.kill(), busy.wait(), idle.wait()
    assert 1.9 <= waited < 10


def test_sbatch_rounds_alternate_the_sides_and_swap_their_order_each_round(monkeypatch):
    """Each round runs both sides for 1 then 2 submitters, real first in even rounds and trainhub first in
    odd ones; the harness settles after each real run; every run's rate is kept for the median."""
    runs = []
    rate = iter(range(1, 100))
    monkeypatch.setattr(slurm_vs_real, "_real_sbatch", lambda environ, clients, n: runs.append(("real", clients))
                        or next(rate))
    monkeypatch.setattr(slurm_vs_real, "_trainhub_sbatch", lambda post, clients, n: runs.append(("trainhub", clients))
                        or next(rate))
    monkeypatch.setattr(slurm_vs_real, "harness_settled", lambda environ: runs.append(("settled", 0)) or 0.0)
    rates = slurm_vs_real._sbatch_rounds({"SLURM_CONF": "x"}, b"", 10, rounds=2)
    assert runs == [("real", 1), ("settled", 0), ("trainhub", 1), ("real", 2), ("settled", 0), ("trainhub", 2),
                    ("trainhub", 1), ("real", 1), ("settled", 0), ("trainhub", 2), ("real", 2), ("settled", 0)]
    assert rates == {("real", 1): [1, 6], ("trainhub", 1): [2, 5], ("real", 2): [3, 8], ("trainhub", 2): [4, 7]}
    runs.clear()
    assert slurm_vs_real._sbatch_rounds(None, b"", 10, rounds=1) == {("trainhub", 1): [9], ("trainhub", 2): [10]}
    assert runs == [("trainhub", 1), ("trainhub", 2)]


WORKER = """
import pathlib, signal, sys, time
done = pathlib.Path(sys.argv[1])
def answer(signum, frame):
    spin = time.process_time() + 0.05
    while time.process_time() < spin:
        pass
    done.write_text("answered")
signal.signal(signal.SIGUSR1, answer)
done.write_text("ready")
while True:
    time.sleep(1)
"""

CLIENT = """
import json, os, pathlib, signal, sys, time
runs = pathlib.Path(sys.argv[1])
count = int(runs.read_text()) if runs.exists() else 0
runs.write_text(str(count + 1))
order, workers = json.loads(sys.argv[2]), json.loads(sys.argv[3])
pid, done = workers[order[min(count, len(order) - 1)]]
pathlib.Path(done).unlink(missing_ok=True)
os.kill(pid, signal.SIGUSR1)
while not pathlib.Path(done).exists():
    time.sleep(0.005)
"""


def test_the_cli_warm_up_runs_until_every_worker_has_answered_once(tmp_path):
    """Which worker a new connection reaches is the server's choice; the warm-up goes on until each has
    answered (its CPU time grew most in a run), and gives up after 4 runs a worker."""
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path / f"done{index}")]) for index in range(2)]
    try:
        while not all((tmp_path / f"done{index}").exists() for index in range(2)):
            time.sleep(0.01)  # until both workers handle the signal
        doors = json.dumps([[worker.pid, str(tmp_path / f"done{index}")] for index, worker in enumerate(workers)])
        pids = [worker.pid for worker in workers]
        for order, runs in (([0, 0, 0, 1], 4), ([1, 0], 2), ([0], 8)):
            counter = tmp_path / f"runs-{len(order)}-{order[0]}"
            slurm_vs_real._warm_every_worker([sys.executable, "-c", CLIENT, str(counter), json.dumps(order), doors],
                                             {}, pids)
            assert int(counter.read_text()) == runs, order
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
