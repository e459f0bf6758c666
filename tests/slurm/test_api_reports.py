"""squeue, sprio, sshare and sacct over REST: Slurm's layouts with the numbers Slurm would print."""

import datetime as dt

import pytest

from tests.slurm.conftest import CLUSTERS, DAY, JOBS, SCHED_DELAY, run_pass, sbatch
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.lifecycle import job_batch_finished

BASE = f"{CLUSTERS}/c1"


def row(*cells):
    """A sprio line: JOBID right 15, PARTITION left 9, then right-justified 10-wide numbers."""
    job_id, partition, *numbers = cells
    return " ".join([str(job_id).rjust(15), partition.ljust(9), *(str(n).rjust(10) for n in numbers)])


def test_sprio_shows_age_and_fair_tree_fairshare(api, queue):
    text = api("vic").get(f"{BASE}/sprio").json()["text"]
    # age 1000 * 1 day / 7 days = 142.857 (printed 143); Fair Tree over 4 user associations (user
    # root, with no usage, ranks first): bob 3/4, alice 2/4, uma 1/4
    assert text.splitlines() == [
        "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE",
        row(1, "a4", 2642, 0, 143, 2500),
        row(2, "a4", 5142, 0, 143, 5000),
        row(3, "a4", 7642, 0, 143, 7500),
    ]


def test_sprio_weights_long_and_norm(api, queue):
    assert api("vic").get(f"{BASE}/sprio", {"weights": "true"}).json()["text"].splitlines()[1] == (
        "        Weights                               1       1000      10000")
    long = api("vic").get(f"{BASE}/sprio", {"long": "true", "jobs": "1"}).json()["text"].splitlines()
    assert long[0].split() == ["JOBID", "PARTITION", "USER", "PRIORITY", "SITE", "AGE", "ASSOC",
                               "FAIRSHARE", "JOBSIZE", "PARTITION", "QOS", "NICE", "TRES"]
    assert long[1].split() == ["1", "a4", "uma", "2642", "0", "143", "0", "2500", "0", "0", "0", "0"]
    norm = api("vic").get(f"{BASE}/sprio", {"norm": "true", "jobs": "3"}).json()["text"].splitlines()
    assert norm[1].split() == ["3", "a4", "0.00000177", "0.1428571", "0.7500000"]
    rows = api("vic").get(f"{BASE}/sprio").json()["rows"]
    assert rows[0]["factors"]["fairshare"]["factor"] == pytest.approx(1 / 4)


def test_sprio_for_an_unknown_job(api, queue):
    assert api("vic").get(f"{BASE}/sprio", {"jobs": "99"}).json()["text"] == (
        "Unable to find jobs matching user/id(s) specified\n")


def test_sprio_filters_that_match_nothing_answer_an_empty_report(api, queue):
    """A job list with no job id in it, or empty user and partition lists, match no job: the
    report is empty (it was a 500, from the raw query Django cannot write for an empty IN)."""
    assert api("vic").get(f"{BASE}/sprio", {"jobs": "height"}).json()["text"] == (
        "Unable to find jobs matching user/id(s) specified\n")
    for params in ({"user": ","}, {"partition": ","}):
        answer = api("vic").get(f"{BASE}/sprio", params)
        assert answer.status_code == 200, params
        assert answer.json()["rows"] == [] and len(answer.json()["text"].splitlines()) == 1, params


def test_job_lists_of_ids_no_job_can_have_match_nothing(api, queue):
    """squeue, sprio and sacct -j with an id past 64 bits or other digits than 0-9 (it was a 500:
    the database refused the number, int() the digits)."""
    for name in ("squeue", "sprio", "sacct"):
        for jobs in ("99999999999999999999999", "\u00b2"):
            answer = api("vic").get(f"{BASE}/{name}", {"jobs": jobs})
            assert answer.status_code == 200, (name, jobs)
            assert answer.json()["rows"] == [], (name, jobs)


def test_squeue_shows_pending_reasons_and_running_nodes(api, queue, accounts, now):
    Node.objects.filter(name="a4-0").update(state=NodeState.UP, state_reason="")
    run_pass(accounts, now + DAY + SCHED_DELAY)
    text = api("vic").get(f"{BASE}/squeue").json()["text"].splitlines()
    assert text[0] == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    # bob's job has the highest priority and takes the free node; the others wait (squeue sorts
    # by partition, state - pending first - and descending priority)
    assert text[1].split() == ["2", "a4", "wrap", "alice", "PD", "0:00", "1", "(Resources)"]
    assert text[2].split() == ["1", "a4", "wrap", "uma", "PD", "0:00", "1", "(Priority)"]
    assert text[3].split() == ["3", "a4", "job", "bob", "R", "0:00", "1", "a4-0"]
    mine = api("vic").get(f"{BASE}/squeue", {"user": "uma", "long": "true"}).json()["text"].splitlines()
    assert mine[0].split()[4:7] == ["STATE", "TIME", "TIME_LIMI"]  # cut to its 9 columns, as squeue -l prints it and mine[1].split()[4] == "PENDING"


def test_squeue_shows_a_finished_job_whose_epilog_still_runs_as_completing(api, queue, accounts, now):
    Node.objects.filter(name="a4-0").update(state=NodeState.UP, state_reason="")
    run_pass(accounts, now + DAY + SCHED_DELAY)
    job = SlurmJob.objects.get(cluster__cluster_id="c1", job_id=3)
    SlurmJob.objects.filter(pk=job.pk).update(state=JobState.COMPLETED, end_time=now + DAY + dt.timedelta(minutes=1))
    JobNode.objects.filter(job=job).update(phase=NodePhase.EPILOG)
    lines = [line.split()[:5] for line in api("vic").get(f"{BASE}/squeue").json()["text"].splitlines()]
    assert ["3", "a4", "job", "bob", "CG"] in lines
    # squeue's state order compares the short codes as strings: CG before PD and R (formats.in_squeue_order)
    assert [line[0] for line in lines[1:]] == ["3", "2", "1"]
    JobNode.objects.filter(job=job).update(phase=NodePhase.DONE)
    lines = [line.split()[0] for line in api("vic").get(f"{BASE}/squeue").json()["text"].splitlines()]
    assert lines[1:] == ["2", "1"]


def test_sprio_read_again_after_a_pass_shows_the_new_factors(api, queue, accounts, now):
    """sprio keeps the lines it laid out (reports._LINES) only for rows that have not changed since."""
    assert api("vic").get(f"{BASE}/sprio").json()["text"].splitlines()[1] == row(1, "a4", 2642, 0, 143, 2500)
    run_pass(accounts, now + 2 * DAY)  # a day older: AGE 1000 * 2/7
    assert api("vic").get(f"{BASE}/sprio").json()["text"].splitlines()[1] == row(1, "a4", 2785, 0, 286, 2500)


def test_squeue_read_again_moves_a_running_jobs_time_on_and_no_pending_jobs(queue, accounts, now):
    from trainhub.slurm import reports

    Node.objects.filter(name="a4-0").update(state=NodeState.UP, state_reason="")
    started = now + DAY + SCHED_DELAY
    run_pass(accounts, started)
    first = reports.squeue(accounts, now=started + dt.timedelta(seconds=5)).text.splitlines()
    later = reports.squeue(accounts, now=started + dt.timedelta(seconds=65)).text.splitlines()
    assert [line.split()[5] for line in first[1:]] == ["0:00", "0:00", "0:05"]
    assert [line.split()[5] for line in later[1:]] == ["0:00", "0:00", "1:05"]


def _job_reads(read):
    """What ``read()`` answers, and the SQL of each query it made of the jobs table."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        answer = read()
    return answer, [query["sql"] for query in queries.captured_queries if '"slurm_slurmjob"' in query["sql"]]


def test_squeue_default_and_long_lines_read_only_the_columns_they_show(queue, accounts, cast, now):
    """squeue's default and -l lines (and the API's rows) read a job's shown columns, not its other
    seventeen; they are the lines and rows its whole row gives (squeue -j reads every column)."""
    from trainhub.slurm import reports

    job_submit(cluster=accounts, user=cast["uma"], now=now,
               submission=Submission(argv=("--array=0-3%2", "--gres=gpu:1", "--wrap", "x")))
    Node.objects.filter(name="a4-0").update(state=NodeState.UP, state_reason="")
    later = now + DAY + SCHED_DELAY
    run_pass(accounts, later)
    every = ",".join(str(job_id) for job_id in SlurmJob.objects.filter(cluster=accounts).values_list("job_id",
                                                                                                     flat=True))
    for long in (False, True):
        shown, sql = _job_reads(lambda long=long: reports.squeue(accounts, now=later + DAY, long=long))
        assert sql and not any('"work_dir"' in query or '"submit_time"' in query for query in sql), sql
        whole = reports.squeue(accounts, now=later + DAY, long=long, jobs=every)
        assert shown.text == whole.text
        # (-j's rows come in the database's order, its text in squeue's)
        assert shown.rows() == sorted(whole.rows(), key=lambda item: [line.split()[0] for line in shown.text.splitlines()[1:]].index(item.get("arrayName", str(item["jobId"]))))
        assert {"R", "PD"} <= {line.split()[4][:2] for line in shown.text.splitlines()[1:]} or long
        assert any("_[" in line for line in shown.text.splitlines())  # the array's pending tasks


def test_sprio_read_again_unchanged_reads_only_each_jobs_id_and_when_its_priority_was_computed(api, queue,
                                                                                                 accounts, now):
    """A second sprio before the next pass is the first one's text and rows, from a read of four
    columns (reports._REPORTS); a job reniced since is no longer listed until a pass computes it."""
    from trainhub.slurm import reports
    from trainhub.slurm.services.jobs import job_set_nice

    first = reports.sprio(accounts, now=now + DAY)
    again, sql = _job_reads(lambda: reports.sprio(accounts, now=now + DAY))
    assert again.text == first.text and again.rows() == first.rows()
    assert len(sql) == 1 and '"factor_fairshare"' not in sql[0] and '"priority_time"' in sql[0]
    assert reports.sprio(accounts, now=now + DAY, jobs="2").text.splitlines()[1].split()[0] == "2"
    _, sql = _job_reads(lambda: reports.sprio(accounts, now=now + DAY))
    assert len(sql) == 1  # a read of one job in between keeps the queue's text
    job = SlurmJob.objects.get(cluster=accounts, job_id=1)
    job_set_nice(job=job, nice=100, actor=job.submitted_by, is_admin=True, now=now + DAY)
    assert [line.split()[0] for line in reports.sprio(accounts, now=now + DAY).text.splitlines()] == [
        "JOBID", "2", "3"]
    run_pass(accounts, now + DAY + SCHED_DELAY)
    assert reports.sprio(accounts, now=now + DAY).text.splitlines()[1] == row(1, "a4", 2542, 0, 143, 2500)


def test_a_report_is_freed_before_the_collector_resumes(api, queue, monkeypatch):
    """A 10,000-job report's objects alive when the collector resumes are scanned by the first
    collection after; the API view drops the report inside collector_paused."""
    import contextlib
    import weakref

    from trainhub.slurm import reports
    from trainhub.slurm.api import reports as api_reports

    built, alive_at_resume = [], []
    build = reports.sprio

    def building(*args, **kwargs):
        report = build(*args, **kwargs)
        built.append(weakref.ref(report))
        return report

    @contextlib.contextmanager
    def paused():
        yield
        alive_at_resume.append(built[-1]() is not None)

    monkeypatch.setattr(reports, "sprio", building)
    monkeypatch.setattr(api_reports, "collector_paused", paused)
    assert api("vic").get(f"{BASE}/sprio").status_code == 200
    assert alive_at_resume == [False]


def test_a_report_asked_for_as_text_is_the_commands_output_alone(api, queue):
    """``Accept: text/plain`` (the CLI) gets the text without the rows and JSON; errors stay JSON."""
    client = api("vic")
    as_json = client.get(f"{BASE}/sprio", {"long": "true"}).json()["text"]
    plain = client.get(f"{BASE}/sprio", {"long": "true"}, HTTP_ACCEPT="text/plain")
    assert plain["Content-Type"] == "text/plain; charset=utf-8" and plain.content.decode() == as_json
    refused = client.get(f"{BASE}/sacct", {"format": "JobID%99999999999"}, HTTP_ACCEPT="text/plain")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == 400
    # squeue's error lines for -O fields it does not know come too, beside the text (still no rows)
    warned = client.get(f"{BASE}/squeue", {"outputFormat": "JobID:6,CPUFreq"}, HTTP_ACCEPT="text/plain").json()
    assert warned == {"text": client.get(f"{BASE}/squeue", {"outputFormat": "JobID:6"}).json()["text"],
                      "stderr": "squeue: error: Invalid job format specification: CPUFreq\n"}


def test_squeue_read_again_moves_a_pending_jobs_pending_time_on_and_last_sched_eval_after_a_pass(queue, accounts,
                                                                                                   now):
    """A pending job's PendingTime moves with the clock and its LastSchedEval with the passes: their lines
    are not kept as the other lines of a pending job are."""
    from trainhub.slurm import formats, reports
    from trainhub.slurm.models import SlurmCluster

    fields = formats.squeue_long_format("JobID:4,PendingTime:6,LastSchedEval")

    def read(moment):
        return [line.split()[1:] for line in reports.squeue(accounts, now=moment, format=fields).text.splitlines()[1:]]

    submitted = SlurmJob.objects.get(cluster=accounts, job_id=1).submit_time
    SlurmCluster.objects.filter(pk=accounts.pk).update(last_pass_time=now + DAY)
    first = read(now + DAY + dt.timedelta(seconds=5))
    SlurmCluster.objects.filter(pk=accounts.pk).update(last_pass_time=now + DAY + dt.timedelta(seconds=60))
    later = read(now + DAY + dt.timedelta(seconds=65))
    waited = int((now + DAY - submitted).total_seconds())
    assert first[0] == [str(waited + 5), f"{now + DAY:%Y-%m-%dT%H:%M:%S}"]
    assert later[0] == [str(waited + 65), f"{now + DAY + dt.timedelta(seconds=60):%Y-%m-%dT%H:%M:%S}"]


def test_sshare_all_shows_the_tree(api, queue):
    text = api("vic").get(f"{BASE}/sshare", {"all": "true"}).json()["text"].splitlines()
    assert text[0] == "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare "
    accounts = [(line[:20].rstrip(), line[21:31].strip()) for line in text[2:]]
    assert accounts[0] == ("root", "")
    fairshare = {line[21:31].strip(): float(line.split()[-1]) for line in text[2:] if line[21:31].strip()}
    assert fairshare == pytest.approx({"root": 1.0, "uma": 0.25, "alice": 0.5, "bob": 0.75}, abs=1e-6)


def test_sacct_takes_its_format_flag(api, accounts):
    """?format= is sacct's --format, not the name of a renderer (DRF answered 404 to it)."""
    answer = api("vic").get(f"{BASE}/sacct", {"format": "JobID,State%12"})
    assert answer.status_code == 200
    assert answer.json()["text"].splitlines()[0].split() == ["JobID", "State"]


def test_sacct_refuses_a_format_width_past_the_limit(api, accounts):
    answer = api("vic").get(f"{BASE}/sacct", {"format": "JobID%99999999999"})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == 'Invalid field width requested: "JobID%99999999999" (at most 1000)'


def test_sacct_shows_the_callers_runs_with_accounting(api, accounts, cast, now):
    job = job_submit(cluster=accounts, user=cast["uma"], now=now,
                     submission=Submission(argv=("-J", "train", "--gres=gpu:2", "-n", "4", "--wrap", "x")))
    run_pass(accounts, now)
    job.refresh_from_db()
    job_batch_finished(job_node=JobNode.objects.get(job=job), exit_code=0, signal=0, max_rss_kb=2048,
                       now=now + dt.timedelta(seconds=60))
    body = api("uma").get(f"{BASE}/sacct").json()
    assert body["text"].splitlines() == [
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
        "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
        f"{job.job_id:<12}      train         a4         ml          4  COMPLETED      0:0 ",
    ]
    accounting = body["rows"][0]
    assert (accounting["elapsedSeconds"], accounting["cpuSeconds"], accounting["gpuSeconds"],
            accounting["maxRssKb"]) == (60, 240, 120, 2048)
    assert api("alice").get(f"{BASE}/sacct").json()["rows"] == []  # only one's own jobs without -a
    assert len(api("alice").get(f"{BASE}/sacct", {"allusers": "true"}).json()["rows"]) == 1


def test_sacct_duplicates_show_a_preempted_run_and_the_requeued_job(api, accounts, cast, now):
    from trainhub.slurm.services.lifecycle import job_requeue

    job = job_submit(cluster=accounts, user=cast["uma"], now=now, submission=Submission(argv=("--wrap", "x")))
    run_pass(accounts, now)
    job_requeue(job=SlurmJob.objects.get(pk=job.pk), now=now + dt.timedelta(seconds=30),
                record_state=JobState.PREEMPTED, desc="preempted by job 9")
    states = [line.split()[5] for line in api("uma").get(f"{BASE}/sacct", {"duplicates": "true"}).json()["text"]
              .splitlines()[2:]]
    # the requeued run reads PREEMPTED until the job runs again; no record of its own while it pends
    assert states == ["PREEMPTED"]
    latest = api("uma").get(f"{BASE}/sacct").json()["text"].splitlines()[2:]
    assert [line.split()[5] for line in latest] == ["PREEMPTED"]
    brief = api("uma").get(f"{BASE}/sacct", {"brief": "true", "duplicates": "true"}).json()["text"].splitlines()
    assert brief[0].split() == ["JobID", "State", "ExitCode"]


def test_reports_need_membership(api, queue):
    for name in ("squeue", "sprio", "sshare", "sacct", "scontrolPartitions"):
        assert api("mallory").get(f"{BASE}/{name}").status_code == 404


def test_rows_come_a_page_at_a_time_with_the_whole_text(api, queue):
    first = api("vic").get(f"{BASE}/sprio", {"pageSize": 2}).json()
    assert [row["jobId"] for row in first["rows"]] == [1, 2] and len(first["text"].splitlines()) == 4
    rest = api("vic").get(f"{BASE}/sprio", {"pageSize": 2, "pageToken": first["nextPageToken"]}).json()
    assert [row["jobId"] for row in rest["rows"]] == [3] and "nextPageToken" not in rest
    assert api("vic").get(f"{BASE}/sprio", {"pageSize": 0}).status_code == 400


def test_tres_weights_add_a_tres_column(api, queue, accounts, now):
    from trainhub.slurm.services.clusters import cluster_config_set

    cluster_config_set(cluster=accounts, changes={"PriorityWeightTRES": "GRES/gpu=2000"}, actor="alice")
    run_pass(accounts, now + DAY + SCHED_DELAY)
    lines = api("vic").get(f"{BASE}/sprio").json()["text"].splitlines()
    assert lines[0].split()[-1] == "TRES"
    # 8 of the partition's 16 GPUs: 0.5 * 2000
    assert lines[1].split()[-1] == "gres/gpu=1000"


def test_a_config_change_takes_effect_in_the_next_pass(api, queue, now):
    response = api("alice").post(f"{BASE}:updateConfig", {"config": {"PriorityWeightAge": "7000"}}, format="json")
    assert response.status_code == 200, response.content
    job = queue["uma"]
    job.refresh_from_db()
    assert job.priority == 2642  # stored by the last pass, under the old weight
    run_pass(job.cluster, now + 2 * DAY)
    job.refresh_from_db()
    # age 7000 * 2 days / 7 days = 2000: the new weight, as a reconfigured slurmctld applies it
    assert job.priority == 2000 + 2500
    assert api("vic").get(f"{BASE}/sprio").json()["text"].splitlines()[1] == row(1, "a4", 4500, 0, 2000, 2500)


def test_a_report_is_built_with_the_collector_paused_and_it_runs_again_after(api, queue, monkeypatch):
    import gc

    from trainhub.slurm import reports

    seen = []
    sprio = reports.sprio
    monkeypatch.setattr(reports, "sprio", lambda *args, **kwargs: (seen.append(gc.isenabled()), sprio(*args, **kwargs))[1])
    assert api("vic").get(f"{BASE}/sprio").status_code == 200
    assert seen == [False] and gc.isenabled()


def test_report_rows_leave_datetimes_as_stored_until_converted(queue, accounts):
    """sqlite3 parses a datetime column as it fetches it (Django registers the converter), and Django's
    loader every PostgreSQL timestamptz; the reports' rows take it as stored, and only the rows
    converted have datetimes."""
    from trainhub.slurm import reports

    fetched, converted = reports._driver_rows(SlurmJob.objects.filter(cluster=accounts, job_id=1),
                                              ("job_id", "submit_time"))
    assert isinstance(fetched[0][1], str)
    assert converted(fetched) == [(1, SlurmJob.objects.get(cluster=accounts, job_id=1).submit_time)]


def test_sacct_names_the_canceller_by_uid_as_slurm_does(api, accounts, cast, now):
    """``CANCELLED by 1001`` (fixtures/22.05/srun-abort/sacct-p.txt): the uid of whoever cancelled,
    the job's user or another (here an administrator)."""
    from trainhub.iam.services import posix_identity_set
    from trainhub.slurm import reports

    posix_identity_set(user=cast["uma"], uid=1001)
    posix_identity_set(user=cast["alice"], uid=1002)
    own = sbatch(api, "uma", "--wrap", "x").json()["jobId"]
    other = sbatch(api, "uma", "--wrap", "x").json()["jobId"]
    assert api("uma").post(f"{JOBS}/{own}:cancel", {}, format="json").status_code == 200
    assert api("alice").post(f"{JOBS}/{other}:cancel", {}, format="json").status_code == 200
    text = reports.sacct(accounts, now=now, viewer="alice", jobs=f"{own},{other}", fields=["JobID", "State"],
                         parsable=True).text
    assert text.splitlines()[1:] == [f"{own}|CANCELLED by 1001|", f"{other}|CANCELLED by 1002|"]


def test_scontrol_show_partition_gives_each_partitions_record_as_text_and_rows(api, queue):
    answer = api("vic").get(f"{BASE}/scontrolPartitions", {"partition": "a4"}).json()
    assert answer["text"].startswith("PartitionName=a4\n   AllowGroups=ALL ") and answer["text"].endswith("\n\n")
    assert [(row["PartitionName"], row["Default"], row["State"]) for row in answer["rows"]] == [("a4", "YES", "UP")]
    line = api("vic").get(f"{BASE}/scontrolPartitions", {"partition": "a4", "oneliner": "true"}).json()["text"]
    assert line == " ".join(answer["text"].split()) + "\n"
    unknown = api("vic").get(f"{BASE}/scontrolPartitions", {"partition": "gone"})
    assert unknown.status_code == 404
    assert (unknown.json()["error"]["message"], unknown.json()["text"]) == (
        "Partition gone not found", "Partition gone not found\n")


def test_sacct_j_lists_the_jobs_it_names_though_never_eligible(accounts, cast, now):
    """22.05.8: without -j sacct leaves out held, --begin and dependent jobs (never eligible), and such a job
    cancelled while it waited; ``sacct -j`` of them lists them PENDING with Start Unknown, then CANCELLED."""
    from trainhub.slurm import reports
    from trainhub.slurm.services.jobs import job_cancel

    jobs = [job_submit(cluster=accounts, user=cast["uma"], submission=Submission(argv=(*args, "--wrap", "x")), now=now)
            for args in (("-H",), ("--begin=now+3600",))]
    jobs.append(job_submit(cluster=accounts, user=cast["uma"], now=now, submission=Submission(
        argv=("-d", f"afterok:{jobs[0].job_id}", "--wrap", "x"))))
    named = ",".join(str(job.job_id) for job in jobs)

    def listed(**selection) -> list[str]:
        return reports.sacct(accounts, now=now, viewer="uma", fields=["JobID", "State", "Start"], parsable=True,
                             **selection).text.splitlines()[1:]

    assert listed() == []
    assert listed(jobs=named) == [f"{job.job_id}|PENDING|Unknown|" for job in jobs]
    for job in reversed(jobs):
        job_cancel(job=job, actor=cast["uma"], is_admin=False, now=now)
    assert [(state.split()[0], start) for _, state, start, _ in (line.split("|") for line in listed(jobs=named))] == [
        ("CANCELLED", "None")] * 3
    assert listed() == []


def test_squeue_all_shows_a_node_range_cancelled_while_held_with_the_cpus_it_asked(accounts, cast, now):
    """22.05.8: ``sbatch -N 2-4 -H``, scancel: squeue -t all shows it CA on 2 nodes with 1 CPU (scontrol's
    NumCPUs=1: a node range without -n asks for one task's CPUs until it runs)."""
    from trainhub.slurm import reports
    from trainhub.slurm.services.jobs import job_cancel

    job = job_submit(cluster=accounts, user=cast["uma"], submission=Submission(argv=("-N", "2-3", "-H", "--wrap", "x")),
                     now=now)
    job_cancel(job=job, actor=cast["uma"], is_admin=False, now=now)
    assert reports.squeue(accounts, now=now, states="all", format="%i %t %D %C").text.splitlines()[1:] == [
        f"{job.job_id} CA 2 1"]


def test_report_answers_are_drf_json_and_follow_the_report_when_read_again(api, queue, accounts, now):
    """The report's JSON keeps its text's encoding between reads (api.reports._text_json): the answer
    stays what DRF's renderer writes, page token included, and a changed report is encoded afresh."""
    from rest_framework.renderers import JSONRenderer

    def read(**params):
        response = api("vic").get(f"{BASE}/sprio", params)
        assert response["Content-Type"] == "application/json"
        assert response.content == JSONRenderer().render(response.json())
        return response.json()

    first = read(pageSize=1)
    assert list(first) == ["text", "rows", "nextPageToken"] and first["nextPageToken"] == "1"
    assert read(pageSize=1) == first
    run_pass(accounts, now + 2 * DAY)
    assert read()["text"].splitlines()[1] == row(1, "a4", 2785, 0, 286, 2500)


def test_a_report_text_over_the_kept_limit_is_answered_but_not_held(api, queue, monkeypatch):
    """A process keeps the JSON of at most KEPT_TEXTS report texts, each at most KEPT_TEXT_LIMIT long: a
    longer one (squeue -t all over a long history) is encoded for its answer and dropped."""
    from rest_framework.renderers import JSONRenderer

    from trainhub.slurm.api import reports as report_api

    report_api._kept_text_json.cache_clear()
    monkeypatch.setattr(report_api, "KEPT_TEXT_LIMIT", 10)
    response = api("vic").get(f"{BASE}/sprio")
    assert len(response.json()["text"]) > 10
    assert response.content == JSONRenderer().render(response.json())
    assert report_api._kept_text_json.cache_info().currsize == 0
    monkeypatch.setattr(report_api, "KEPT_TEXT_LIMIT", 1 << 22)
    assert api("vic").get(f"{BASE}/sprio").content == response.content
    assert report_api._kept_text_json.cache_info().currsize == 1
