"""sbatch's --mem*, -w/-x, --exclusive, --gpus/--gpus-per-task, --export, --signal and --mail-* options:
their messages as recorded on Slurm 22.05.8 (fixtures/22.05/options.sh), and what they do to placement."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from tests.slurm.conftest import JOBS, run_pass, sbatch
from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.models import JobState, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .test_real_slurm import harness, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "options"


def _recorded() -> list[tuple[str, list[str]]]:
    found = []
    for line in (REAL.parent / "options.sh").read_text().splitlines():
        if line.startswith("rec ") and "$S" in line:
            name, _, rest = line[4:].partition(" $S ")
            found.append((name, shlex.split(rest)))
    return found


def _submitted_at(job_id: int) -> dt.datetime:
    """The recording's clock: job N's SubmitTime (scontrol-N.txt)."""
    return dt.datetime.fromisoformat(f"{_scontrol(job_id)['SubmitTime']}+00:00")


def test_sbatch_prints_what_it_printed_on_the_harness(harness, cast):
    """And scontrol show job of each held job it made (scontrol-N.txt), byte for byte."""
    cluster, _ = harness
    carol = get_user_model().objects.get(username="carol")
    base = ["-A", "bio", "-p", "batch", "-H", "--wrap", "true"]
    replayed, made, now = 0, [], _submitted_at(1)
    for name, args in _recorded():
        if (REAL / f"scontrol-{cluster.next_job_id}.txt").exists():
            now = _submitted_at(cluster.next_job_id)
        submission = Submission(argv=(*base, *args), alloc_node="localhost", submit_dir="/tmp")
        try:
            job = job_submit(cluster=cluster, user=carol, submission=submission, now=now)
            out, err = submitted_message(job, submission), ""
            made.append(job.job_id)
            cluster.refresh_from_db()
        except ApiError as error:
            out, err = "", error.message
        recorded_err = (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]
        assert (out + "\n" if out else "", err + "\n" if err else "") == ((REAL / f"{name}.txt").read_text(),
                                                                         recorded_err), name
        replayed += 1
    assert replayed == 23
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=now, job=str(job_id)).text for job_id in made}
    assert len(shown) == 17
    assert scontrol_differences(shown, REAL) == {}


def _scontrol(job_id: int) -> dict[str, str]:
    text = (REAL / f"scontrol-{job_id}.txt").read_text()
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def test_the_recorded_options_show_in_the_job_as_scontrol_shows_them(harness, cast):
    cluster, _ = harness
    carol = get_user_model().objects.get(username="carol")

    def submit(*args):
        return job_submit(cluster=cluster, user=carol,
                          submission=Submission(argv=("-A", "bio", "-p", "batch", "-H", "--wrap", "true", *args)))

    assert _scontrol(6)["ReqNodeList"] == submit("-N", "2", "-w", "gpu[2-3]").req_nodes
    assert _scontrol(8)["ExcNodeList"] == submit("-x", "gpu[1-4]").exc_nodes
    assert (_scontrol(9)["OverSubscribe"], submit("--exclusive").exclusive) == ("NO", True)
    job = submit("--mail-type=END,FAIL", "--mail-user=carol@example.org")
    assert (job.mail_type, job.mail_user) == (_scontrol(17)["MailType"], _scontrol(17)["MailUser"])
    assert _scontrol(12)["TRES"].endswith("gres/gpu=4") and submit("-n", "2", "--gpus-per-task=2").gpus_per_node == 4
    assert _scontrol(2)["MinMemoryCPU"] == f"{submit('-n', '2', '--mem-per-cpu=1500').mem_per_cpu}M"
    assert _scontrol(1)["MinMemoryNode"] == f"{submit('--mem=2G').mem_per_node // 1024}G"


@pytest.fixture
def memory_cluster(accounts):
    """The seed's cluster with memory a consumable resource."""
    SlurmCluster.objects.filter(pk=accounts.pk).update(
        config={**accounts.config, "SelectTypeParameters": "CR_Core_Memory"})
    return accounts


def _node_of(job_id: int) -> str:
    return SlurmJob.objects.get(job_id=job_id).node_list


def test_memory_fills_a_node(api, memory_cluster):
    from trainhub.inventory.models import Node
    from trainhub.slurm.slurmconf import node_spec

    memory_gb = node_spec(Node.objects.get(name="a4-0"), memory_cluster).real_memory_mb // 1024
    big = memory_gb * 2 // 3
    first = sbatch(api, "uma", f"--mem={big}G", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    second = sbatch(api, "uma", f"--mem-per-gpu={big}G", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    third = sbatch(api, "uma", f"--mem-per-cpu={big * 1024}", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    run_pass(memory_cluster)
    # one GPU each would fit eight to a node; their memory fits one
    assert {_node_of(first), _node_of(second)} == {"a4-0", "a4-1"}
    assert SlurmJob.objects.get(job_id=third).state == JobState.PENDING
    assert sbatch(api, "uma", f"--mem={memory_gb + 1}G", "--wrap", "true").json()["error"]["message"] == (
        "sbatch: error: Memory specification can not be satisfied\n"
        "sbatch: error: Batch job submission failed: Requested node configuration is not available")


def test_nodelist_exclude_and_exclusive_place_jobs(api, accounts):
    named = sbatch(api, "uma", "-w", "a4-1", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    elsewhere = sbatch(api, "uma", "-x", "a4-1", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    whole = sbatch(api, "uma", "--exclusive", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    run_pass(accounts)
    assert (_node_of(named), _node_of(elsewhere)) == ("a4-1", "a4-0")
    # both nodes are in use, so the exclusive job waits although seven GPUs are free on each
    assert SlurmJob.objects.get(job_id=whole).state == JobState.PENDING
    assert sbatch(api, "uma", "-w", "a4-9", "--wrap", "true").json()["error"]["message"] == (
        "sbatch: error: Batch job submission failed: Invalid node name specified")
    assert sbatch(api, "uma", "-w", "a4-[", "--wrap", "true").status_code == 400


def test_gpus_spread_over_the_nodes_and_gpus_per_task_multiply(api, accounts):
    spread = sbatch(api, "uma", "-N", "2", "--gpus=6", "--wrap", "true").json()["job"]
    per_task = sbatch(api, "uma", "-n", "3", "--gpus-per-task=2", "--wrap", "true").json()["job"]
    assert (spread["gpusPerNode"], per_task["gpusPerNode"]) == (3, 6)


def test_export_signal_and_mail_are_recorded(api, accounts):
    job = sbatch(api, "uma", "--export=ALL,FOO=bar", "--signal=B:USR1@120", "--mail-type=begin,END",
                 "--mail-user=uma@example.org", "--wrap", "true").json()["job"]
    assert (job["export"], job["signal"], job["mailType"], job["mailUser"]) == (
        "ALL,FOO=bar", "B:USR1@120", "BEGIN,END", "uma@example.org")
    assert sbatch(api, "uma", "--signal=SIGTERM", "--wrap", "true").json()["job"]["signal"] == "TERM@60"
    assert api("uma").get(f"{JOBS}/{job['jobId']}").json()["signal"] == "B:USR1@120"
