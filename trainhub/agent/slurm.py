"""The Slurm side of a node agent (slurmd's part): on each of its nodes it runs, for every job the
scheduler allocated there, the cluster's prolog scripts, then the batch script on the batch host,
then the epilog scripts, and reports each step through the agent API (which hands it to
trainhub.slurm.services.lifecycle). It reads only the job-step documents of its own node.

- Scripts are files run as ``["/bin/bash", path]`` (argument lists, never a shell string), with
  Slurm's environment (trainhub.slurm.jobenv); prolog/epilog get no inherited PATH, as in Slurm.
- Prolog scripts run one after another and stop at the first failure (PrologFlags=Alloc: on
  every node at allocation; the batch script starts when every node's prolog succeeded).
- The batch script runs under its own supervisor (trainhub.agent.supervisor, as a replica does),
  as the project's uid when the agent isolates projects (``--isolate``, ``--replica-user``),
  which writes its output to ``slurm-<jobid>.out`` (or --output/--error) in the job's working
  directory; the agent ships the lines to the database. A restarted agent re-adopts it; one whose
  supervisor is gone too is lost (NODE_FAIL, requeue). Prolog/epilog output goes to the
  database only.
- A job reaches a node's GPUs only after every earlier job on those GPUs has finished its epilog
  there (a preemptor waits for its victims, as Slurm waits for COMPLETING jobs).
- Simulated pools run no batch script: the job "runs" for the pool's simulated run time.
- Max RSS of the batch script's process group is sampled every tick (jobacct_gather/linux sums
  the task tree's RSS the same way).
- Job steps (``srun`` in the batch script, see trainhub.agent.srun): the batch script finds an
  ``srun`` first on its PATH and the run's step credential in TRAINHUB_STEP_CREDENTIAL. Every
  node of a step gets its tasks in its assignments and runs each under its own supervisor
  (trainhub.agent.supervisor, so a restarted agent re-adopts them), with the step's environment
  (jobenv.step_environments) over srun's own, in the job's working directory; it ships each
  task's lines and its exit as it exits (srun says a failed task as it fails), the node done when all
  of its tasks have ended. When the job leaves
  its RUNNING phase (cancel, time limit, the batch script ended) or srun was interrupted, the
  tasks are stopped - SIGTERM, SIGKILL after the grace period - before the epilog runs.
- ``srun --pty``: the node of task 0 runs it on a pseudo-terminal (its supervisor's, of the size
  srun's terminal had), ships what it prints as raw ``pty`` chunks, and writes what srun typed
  (and window size changes), which its assignments list, to the terminal, acknowledging each so
  the control plane forgets it. srun's input wakes the agent as any change of its assignments
  does; while a terminal runs here the agent's rounds come every TERMINAL_POLL_SECONDS, so what
  the command prints reaches srun within that. Only HTTP(S) to the control plane, as ever.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainhub.agent.client import ControlPlane, error_message
from trainhub.agent import srun
from trainhub.agent.executors import INHERITED_ENV, FailedToStart, ReplicaProcess, SubprocessReplica
from trainhub.agent.replicas import SIMULATED as SIMULATED_RECORD
from trainhub.agent.replicas import ReplicaRun, ship_logs
from trainhub.agent.supervisor import LAUNCH, SPEC, open_append
from trainhub.slurm import jobenv

logger = logging.getLogger("trainhub.agent")
BASH = "/bin/bash"
SIGTERM = 15
PROLOG, RUNNING, EPILOG = "PROLOG", "RUNNING", "EPILOG"
#: The pause between rounds while an srun --pty task runs here (its output's delay to srun).
TERMINAL_POLL_SECONDS = 0.1
#: A step this agent reported on, waiting for the control plane's next document (nothing to do).
REPORTED = "REPORTED"


def cluster_root(work_dir: Path, cluster_id: str) -> Path:
    """The directory standing in for a cluster's shared file system (its /home)."""
    return work_dir / "slurm" / cluster_id


def host_path(work_dir: Path, cluster_id: str, cluster_path: str) -> Path:
    """A path as the job sees it on the cluster (``/home/uma``) -> the directory on this host."""
    return cluster_root(work_dir, cluster_id) / cluster_path.lstrip("/")


def process_group_rss_kb(pgid: int) -> int | None:
    """Resident memory of every process in a process group, in kB (None if none is left)."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    total, found = 0, False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            # Fields after the command (which may hold spaces) start after its closing ')'.
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) != pgid:
                continue
            total += int(Path(entry.path, "statm").read_text().split()[1]) * page_kb
            found = True
        except (OSError, ValueError, IndexError):
            continue
    return total if found else None


class ScriptChain:
    """Scripts run one after another; the chain's exit status is the first non-zero one (or 0)."""

    def __init__(self, scripts: list[Path], env: dict[str, str], cwd: Path, now: dt.datetime):
        self._scripts = list(scripts)
        self._env = env
        self._cwd = cwd
        self._current: ReplicaProcess | None = None
        self._lines: list[tuple[dt.datetime, str]] = []
        self._start_next(now)

    def _start_next(self, now: dt.datetime) -> None:
        script = self._scripts.pop(0) if self._scripts else None
        if script is None:
            self._current = None
            return
        try:
            self._current = SubprocessReplica([BASH, str(script)], self._env, self._cwd, inherit=())
        except OSError as exc:
            self._current = FailedToStart(now, f"cannot run {script.name}: {exc}")

    def poll(self, now: dt.datetime) -> int | None:
        while self._current is not None:
            code = self._current.poll(now)
            self._lines += [(time, text) for _, time, text in self._current.drain()]
            if code is None:
                return None
            if code != 0:
                return code
            self._start_next(now)
        return 0

    def drain(self) -> list[tuple[dt.datetime, str]]:
        lines, self._lines = self._lines, []
        return lines

    def kill(self) -> None:
        self._scripts = []
        if self._current is not None:
            self._current.kill()


def _kill_at(step: dict) -> dt.datetime | None:
    """When a preempted job's GraceTime ends on this node (None: not being preempted)."""
    return dt.datetime.fromtimestamp(step["killAt"], dt.UTC) if step["killAt"] is not None else None


def _preempted(step: dict) -> bool:
    return step["stopRequested"] and step["killAt"] is not None


@dataclass
class _Batch:
    """The batch script, under its supervisor (which writes its output files)."""

    run: ReplicaRun
    #: Its --error file (its --output one without --error); unknown to an agent that re-adopted it.
    error_file: Path | None = None
    stop_sent: dt.datetime | None = None
    #: slurmstepd's line saying why the job is stopped is in the error file.
    stop_said: bool = False
    max_rss_kb: int | None = None
    #: When the job's --signal was sent (once, its TIME before the time limit).
    signalled: bool = False


@dataclass
class _StepTasks:
    """One step's tasks on this node (each under its supervisor), keyed by SLURM_PROCID."""

    job_node_id: int
    #: srun --pty: task 0, if it runs here, is on a terminal.
    terminal: bool = False
    runs: dict[int, ReplicaRun] = field(default_factory=dict)
    stop_sent: dt.datetime | None = None
    #: Whether the job's --signal (without B:) has reached these tasks.
    signalled: bool = False
    #: Whether a preemption's SIGTERM (the start of its GraceTime) has reached these tasks.
    preempt_sent: bool = False
    #: srun --pty: the last of srun's inputs written to task 0's terminal.
    delivered: int = 0
    #: How many of the tasks' exits the control plane has been told (a task's as it exits).
    exits_told: int = 0


@dataclass
class _Work:
    """What runs for one job step on this node now: a prolog or epilog chain, or the batch script."""

    kind: str
    chain: ScriptChain | None = None
    batch: _Batch | None = None


class SlurmNodeWork:
    def __init__(self, *, api: ControlPlane, work_dir: Path, grace: dt.timedelta, run_dir: Path,
                 srun_url: str | None = None, run_as: Callable[[dict], dict | None] = lambda step: None):
        self.api = api
        #: The uid/gid a job's batch script and tasks run as (None: the agent's own), from its document.
        self.run_as = run_as
        self.work_dir = work_dir
        self.grace = grace
        #: Where the supervisors keep their records: ``batch/<job node>`` for a batch script,
        #: ``tasks/<step node>/<task>`` for a step's task.
        self.batch_dir = run_dir / "batch"
        self.task_dir = run_dir / "tasks"
        # The records hold the jobs' environments and step credentials: only the agent reads them.
        run_dir.mkdir(parents=True, exist_ok=True)
        run_dir.parent.chmod(0o700)
        #: The control plane's URL as srun in a batch script reaches it (default: the agent's).
        self.srun_url = srun_url or api.url
        self.work: dict[int, _Work] = {}
        #: Step tasks running here, per step node (the assignment's ``steps[].id``).
        self.tasks: dict[int, _StepTasks] = {}
        #: Log lines sent per job step (the control plane drops a resent overlap).
        self.sent: dict[int, int] = {}
        self.recovered = False
        #: A report moved a step on: the node agent fetches its assignments afresh.
        self.changed = False

    @property
    def interactive(self) -> bool:
        """An srun --pty task runs here: its user waits for what it prints."""
        return any(0 in tasks.runs and tasks.terminal for tasks in self.tasks.values())

    # Reading ----------------------------------------------------------------------------------

    def _context(self, step: dict, now: dt.datetime) -> tuple[jobenv.JobContext, jobenv.NodeContext]:
        job = step["job"]
        submit_dir = host_path(self.work_dir, job["clusterId"], job["workDir"])
        start = job["startEpoch"] or int(now.timestamp())
        stdout, stderr = self._output_paths(step, submit_dir)
        hosts = tuple(step["hosts"])
        context = jobenv.JobContext(
            cluster_name=job["clusterId"], job_id=job["jobId"], job_name=job["name"], user=job["user"],
            account=job["account"], partition=job["partition"], qos=job["qos"], hosts=hosts,
            cpus_per_node=tuple(step["cpusPerNode"]), num_tasks=job["numTasks"],
            restart_count=step["runIndex"], submit_dir=str(submit_dir), submit_host=hosts[0],
            stdout_path=str(stdout), stderr_path=str(stderr), comment=job["comment"], start_epoch=start,
            end_epoch=start + job["timeLimitMinutes"] * 60 if job["timeLimitMinutes"] is not None else None,
            uid=job["uid"], gid=job["gid"], cpus_per_task=job["cpusPerTask"], ntasks_per_node=job["ntasksPerNode"],
            gpus_per_job=job["gpusPerJob"], gpus_per_node_option=job.get("gpusPerNodeOption", 0),
            gpus_per_task=job.get("gpusPerTask", 0), cpus_per_gpu=job.get("cpusPerGpu", 0),
            memory=tuple(job.get("memory", (0, 0, 0))),
        )
        return context, jobenv.NodeContext(index=step["index"], gpu_indices=tuple(step["gpuIndices"]))

    def _output_paths(self, step: dict, submit_dir: Path) -> tuple[Path, Path]:
        """--output/--error: relative to the working directory, or absolute on the cluster's file system."""
        job = step["job"]
        names = {"job_id": job["jobId"], "job_name": job["name"], "user": job["user"], "node": step["nodeName"]}

        def resolve(pattern: str) -> Path:
            path = jobenv.output_path(pattern, **names)
            return host_path(self.work_dir, job["clusterId"], path) if path.startswith("/") else submit_dir / path

        stdout = resolve(job["stdoutPattern"])
        return stdout, resolve(job["stderrPattern"]) if job["stderrPattern"] else stdout

    def _spool(self, step: dict) -> Path:
        """slurmd's spool directory for one run of a job on one node (scripts are written here).

        Per node, as each slurmd has its own: an agent serving two nodes of one job writes each
        node's prolog and epilog while the other node's bash may still be reading its copy.
        """
        job = step["job"]
        path = (self.work_dir / "slurm-spool" / step["nodeName"] / job["clusterId"]
                / f"job{job['jobId']}.{step['runIndex']}")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _write_scripts(self, step: dict, kind: str, scripts: list[str]) -> list[Path]:
        spool = self._spool(step)
        paths = []
        for index, text in enumerate(scripts):
            path = spool / f"{kind}-{index}.sh"
            path.write_text(text)
            paths.append(path)
        return paths

    # Reporting --------------------------------------------------------------------------------

    def _report(self, step: dict, event: str, body: dict, now: dt.datetime) -> None:
        self.changed = True
        answer = self.api.post(f"/agent/v1/slurm/{step['id']}/{event}", {"time": now.timestamp(), **body})
        if answer.status not in (200, 404):
            raise RuntimeError(f"Slurm {event} report of step {step['id']} refused: {error_message(answer)}")

    def _log(self, step: dict, stream: str, lines: list[tuple[dt.datetime, str]]) -> None:
        if not lines:
            return
        first = self.sent.get(step["id"], 0)
        answer = self.api.post(f"/agent/v1/slurm/{step['id']}/logs", {
            "first": first, "lines": [[stream, time.timestamp(), text] for time, text in lines]})
        if answer.status == 409:  # the control plane holds more or fewer lines than this agent sent
            first = int(answer.body.get("expected", 0))
            self.sent[step["id"]] = first
            return self._log(step, stream, lines)
        self.sent[step["id"]] = first + len(lines)

    # Ticking ----------------------------------------------------------------------------------

    def tick(self, steps: list[dict], *, now: dt.datetime) -> None:
        if not self.recovered:
            self._recover(steps, now)
        live = {step["id"] for step in steps}
        for step in steps:
            try:
                self._supervise_tasks(step, now)
                self._advance(step, steps, now)
            except Exception:  # noqa: BLE001 - one job's trouble never stalls the node's others
                logger.exception("Slurm job step %s failed to advance; retrying next round", step["id"])
        for pk in [pk for pk in self.work if pk not in live]:
            self._stop(pk)
        for pk in [pk for pk, tasks in self.tasks.items() if tasks.job_node_id not in live]:
            for run in self.tasks.pop(pk).runs.values():
                run.kill(now.timestamp())

    def _recover(self, steps: list[dict], now: dt.datetime) -> None:
        """At start-up: a batch script a previous agent started is re-adopted from its supervisor's
        record (one that never started is lost: NODE_FAIL, requeue); prologs and epilogs simply run
        again."""
        self.recovered = True
        for step in steps:
            if step["phase"] == RUNNING and step["batchHost"] and step["id"] not in self.work:
                directory = self.batch_dir / str(step["id"])
                if (directory / SPEC).exists() or (directory / SIMULATED_RECORD).exists():
                    self.work[step["id"]] = _Work("batch", batch=_Batch(ReplicaRun(directory)))
                    continue
                self._report(step, "lost", {"reason": "the node agent restarted while it ran"}, now)
                step["phase"] = REPORTED

    def _blocked(self, step: dict, steps: list[dict]) -> bool:
        """Earlier jobs still on any of this allocation's GPUs of the node must leave first."""
        mine = set(step["gpuIndices"])
        return any(other["id"] < step["id"] and mine & set(other["gpuIndices"]) for other in steps)

    def _advance(self, step: dict, steps: list[dict], now: dt.datetime) -> None:
        work = self.work.get(step["id"])
        if step["phase"] == PROLOG:
            if work is None and not self._blocked(step, steps):
                self._start_chain(step, "prolog", step["prologScripts"], now)
            elif work is not None:
                self._poll_chain(step, work, now)
        elif step["phase"] == RUNNING and step["batchHost"]:
            if work is None:
                self._launch_batch(step, now)
            else:
                self._supervise_batch(step, work, now)
        elif step["phase"] == EPILOG:
            if any(tasks.job_node_id == step["id"] for tasks in self.tasks.values()):
                return  # the epilog runs once the job's tasks on this node have ended
            if work is not None and work.kind != "epilog":
                self._stop(step["id"])
                work = self.work.get(step["id"])
            if work is None:
                self._start_chain(step, "epilog", step["epilogScripts"], now)
            elif work.kind == "epilog":
                self._poll_chain(step, work, now)

    def _start_chain(self, step: dict, kind: str, scripts: list[str], now: dt.datetime) -> None:
        context, node = self._context(step, now)
        if kind == "prolog":
            env = jobenv.prolog_environment(context, node)
        else:
            job = step["job"]
            env = jobenv.epilog_environment(context, node, exit_code=job["exitCode"], signal=job["exitSignal"])
        paths = self._write_scripts(step, kind, scripts)
        self.work[step["id"]] = _Work(kind, chain=ScriptChain(paths, env, self._spool(step), now))

    def _poll_chain(self, step: dict, work: _Work, now: dt.datetime) -> None:
        code = work.chain.poll(now)
        self._log(step, work.kind, work.chain.drain())
        if code is not None:
            del self.work[step["id"]]
            self._report(step, work.kind, {"exitCode": code}, now)

    def _output_files(self, step: dict) -> tuple[Path, Path]:
        """The job's --output and --error files as resolved paths, only through jobenv.output_file
        (the symlink-resolving containment check), after the working directory passed the same
        check and was created; the same path for both when --error is unset. The batch script's supervisor opens
        them once, with O_NOFOLLOW, before the script starts, and writes through those descriptors
        until it ends (as slurmstepd does): a script that swaps its output file for a symlink to a
        host file while it runs writes nothing there. Raises jobenv.OutsideCluster or OSError."""
        job = step["job"]
        root = cluster_root(self.work_dir, job["clusterId"])
        names = {"job_id": job["jobId"], "job_name": job["name"], "user": job["user"], "node": step["nodeName"]}
        self._working_directory(step, jobenv.cluster_file(root, job["workDir"]))  # the job's uid owns it
        paths = [jobenv.output_file(root, pattern, cwd=job["workDir"], **names)
                 for pattern in (job["stdoutPattern"], job["stderrPattern"] or job["stdoutPattern"])]
        # A missing directory is not created (as slurmstepd, which fails the launch): the agent runs
        # as root, and a directory made on the way could be one a job swapped for a symlink.
        return paths[0].resolve(), paths[1].resolve()

    def _launch_batch(self, step: dict, now: dt.datetime) -> None:
        try:
            stdout, stderr = self._output_files(step)
        except jobenv.OutsideCluster as exc:
            self._fail_launch(step, str(exc), now)
            return
        except OSError as exc:
            self._fail_launch(step, f"Could not open output file: {exc.filename}: {exc.strerror}", now)
            return
        context, node = self._context(step, now)
        job = step["job"]
        env = {**jobenv.batch_environment(context, node), **job["arrayEnvironment"], **self._srun_environment(step)}
        submit_dir = Path(context.submit_dir)
        self._working_directory(step, submit_dir)
        directory = self.batch_dir / str(step["id"])
        if step["simulated"]:
            announce = [f"simulated batch script of job {job['jobId']} on {step['nodeName']}",
                        *(f"{name}={env[name]}" for name in sorted(env) if name.startswith("SLURM_JOB_"))]
            with os.fdopen(open_append(str(stdout), self.run_as(step)), "a", encoding="utf-8") as handle:
                handle.writelines(f"{line}\n" for line in announce)
            run = ReplicaRun.simulate(directory, started=now.timestamp(), runtime=step["simulatedRuntimeSeconds"],
                                      announce=announce)
        else:
            script = self._spool(step) / "slurm_script"
            script.write_text(job["script"])
            # The batch script inherits the agent's basic environment (PATH, HOME, ...), as sbatch
            # exports the submitter's; its supervisor writes its output files.
            inherited = jobenv.export_environment(
                job["export"], {name: os.environ[name] for name in INHERITED_ENV if name in os.environ})
            run = ReplicaRun.start(directory, argv=[BASH, str(script), *job["scriptArgs"]], env={**inherited, **env},
                                   cwd=submit_dir, user=self.run_as(step),
                                   files={"stdout": str(stdout), "stderr": str(stderr)})
        self.work[step["id"]] = _Work("batch", batch=_Batch(run, error_file=stderr))

    def _working_directory(self, step: dict, path: Path) -> None:
        """The job's working directory, created (owned by the job's uid) where it does not exist yet."""
        if path.is_dir():
            return
        path.mkdir(parents=True)
        user = self.run_as(step)
        if user:
            os.chown(path, user["uid"], user["gid"])

    def _srun_environment(self, step: dict) -> dict[str, str]:
        """What srun in the batch script needs: itself first on the PATH, where the control plane is
        and the run's step credential."""
        bin_dir = self.work_dir / "slurm-bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        bin_dir.chmod(0o755)
        # srun.py beside its wrapper, and the first Python 3 the job's uid may run (the agent's own
        # may sit where only the agent can reach it).
        program = bin_dir / "srun.py"
        pythons = " ".join(shlex.quote(path) for path in (sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"))
        wrapper = (f'#!/bin/sh\nfor python in {pythons}; do\n'
                   f'  if [ -x "$python" ]; then exec "$python" -S {shlex.quote(str(program))} "$@"; fi\ndone\n'
                   'echo "srun: error: no Python 3 this user may run" >&2\nexit 1\n')
        for path, text in ((program, Path(srun.__file__).read_text()), (bin_dir / "srun", wrapper)):
            if not path.exists() or path.read_text() != text:
                temporary = path.with_name(path.name + ".tmp")
                temporary.write_text(text)
                temporary.chmod(0o755)
                temporary.replace(path)
        env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin')}",
               "TRAINHUB_URL": self.srun_url, "TRAINHUB_STEP_CREDENTIAL": step["stepCredential"] or ""}
        if isinstance(self.api.session.verify, str):
            env["TRAINHUB_CA_BUNDLE"] = self.api.session.verify
        return env

    # Step tasks -------------------------------------------------------------------------------

    def _supervise_tasks(self, step: dict, now: dt.datetime) -> None:
        """Start (or re-adopt) this node's tasks of each step listed for the job, stop them once the
        job has left its RUNNING phase, ship their lines and report their exits."""
        for doc in step["steps"]:
            tasks = self.tasks.get(doc["id"])
            if tasks is None:
                tasks = self.tasks[doc["id"]] = self._start_tasks(step, doc, now)
            if step["phase"] != RUNNING or doc["stopRequested"] or _preempted(step):
                first = doc.get("stopSignal", SIGTERM) if step["phase"] == RUNNING and doc["stopRequested"] else SIGTERM
                self._stop_tasks(tasks, now, _kill_at(step), first=first)
            else:
                plan = self._signal_due(step, now)
                if plan is not None and not plan.batch_only and not tasks.signalled:
                    for run in tasks.runs.values():
                        run.signal(plan.signum, now.timestamp())
                    tasks.signalled = True
            # Exits first: a task's last lines are in its log before its exit is recorded.
            exits = []
            for task, run in tasks.runs.items():
                status = run.exit_status(now.timestamp())
                if status is None and run.lost():
                    status = -9  # its supervisor is gone (the machine rebooted): as if killed
                if status is not None:
                    exits.append([task, status, 0] if status >= 0 else [task, 0, -status])
            if doc.get("pty") and 0 in tasks.runs:
                self._deliver_input(doc, tasks)
            shipped = all([ship_logs(self.api, run, f"/agent/v1/slurm/tasks/{doc['id']}/{task}/logs")
                           for task, run in tasks.runs.items()])
            if shipped and len(exits) == len(tasks.runs):
                self._report_tasks(doc, exits, now)
            elif shipped and len(exits) > tasks.exits_told:
                # Those that exited so far, after their lines: srun says a failed one as it exits
                # (trainhub.slurm.services.steps.step_tasks_exited).
                self._tell_exits(doc, exits, now)
                tasks.exits_told = len(exits)

    def _deliver_input(self, doc: dict, tasks: _StepTasks) -> None:
        """Write srun's new input to task 0's terminal and tell the control plane how far it got."""
        fresh = [item for item in doc["input"] if item[0] > tasks.delivered]
        taken = tasks.runs[0].write_terminal([{"data": data} if data else {"rows": rows, "cols": cols}
                                              for _, data, rows, cols in fresh])
        if not taken:
            return
        tasks.delivered = fresh[taken - 1][0]
        answer = self.api.post(f"/agent/v1/slurm/tasks/{doc['id']}/input", {"through": tasks.delivered})
        if answer.status not in (200, 404):
            logger.warning("input of step tasks %s not acknowledged: %s", doc["id"], error_message(answer))

    def _start_tasks(self, step: dict, doc: dict, now: dt.datetime) -> _StepTasks:
        tasks = _StepTasks(step["id"], terminal=bool(doc.get("pty")))
        directory = self.task_dir / str(doc["id"])
        fresh = [task for task in doc["taskIds"] if not (directory / str(task)).exists()]
        for task in doc["taskIds"]:
            if task not in fresh:
                tasks.runs[task] = ReplicaRun(directory / str(task))  # started before this agent restarted
        if not fresh:
            return tasks
        if step["phase"] != RUNNING:
            for task in fresh:
                tasks.runs[task] = ReplicaRun.failed(directory / str(task), now=now.timestamp(),
                                                     reason="the job ended before the task started")
            return tasks
        context, node = self._context(step, now)
        user = self.run_as(step)
        envs = jobenv.step_environments(context, node, jobenv.StepContext(
            step_id=doc["stepId"], hosts=tuple(doc["hosts"]), tasks_per_node=tuple(doc["tasksPerNode"]),
            node_index=doc["nodeIndex"], task_ids=tuple(doc["taskIds"]), gpu_indices=tuple(doc["gpuIndices"])))
        job = step["job"]
        try:
            cwd = jobenv.cluster_file(cluster_root(self.work_dir, job["clusterId"]), job["workDir"])
        except jobenv.OutsideCluster as exc:
            refused = f"slurmstepd: error: {exc}"
        else:
            refused = None
            self._working_directory(step, cwd)
        for task, env in zip(doc["taskIds"], envs):
            if task not in fresh:
                continue
            if refused:
                tasks.runs[task] = ReplicaRun.failed(directory / str(task), reason=refused, now=now.timestamp())
            else:
                tasks.runs[task] = ReplicaRun.start(directory / str(task), argv=list(doc["argv"]),
                                                    env={**doc["environment"], **env}, cwd=cwd,
                                                    user=user, terminal=doc.get("pty") if task == 0 else None,
                                                    exec_error=f"slurmstepd-{step['nodeName']}: error: execve(): "
                                                               "{program}: {strerror}", task_pid=True)
        return tasks

    @staticmethod
    def _signal_due(step: dict, now: dt.datetime) -> jobenv.SignalPlan | None:
        """The job's --signal once its time has come (TIME seconds before the time limit), else None;
        never for a simulated node, whose runs a signal would end."""
        job = step["job"]
        plan = jobenv.signal_plan(job["signal"])
        if plan is None or step["simulated"] or job["startEpoch"] is None or job["timeLimitMinutes"] is None:
            return None
        due = job["startEpoch"] + job["timeLimitMinutes"] * 60 - plan.seconds
        return plan if now.timestamp() >= due else None

    def _stop_tasks(self, tasks: _StepTasks, now: dt.datetime, kill_at: dt.datetime | None = None, *,
                    first: int = SIGTERM) -> None:
        """``first`` (SIGTERM; SIGINT after srun's second Ctrl-C), SIGKILL KillWait later. Within a
        preemption's GraceTime (``kill_at`` ahead) the tasks get SIGTERM once at its start and the rest
        at its end, as 22.05 signals a victim's steps."""
        if kill_at is not None and now < kill_at:
            if not tasks.preempt_sent:
                for run in tasks.runs.values():
                    run.terminate(now.timestamp())
                tasks.preempt_sent = True
            return
        if tasks.stop_sent is None:
            tasks.stop_sent = now
            for run in tasks.runs.values():
                run.signal(first, now.timestamp())
        elif now >= tasks.stop_sent + self.grace:
            for run in tasks.runs.values():
                run.kill(now.timestamp())

    def _tell_exits(self, doc: dict, exits: list[list[int]], now: dt.datetime) -> None:
        """Tell the control plane the exits of the step's tasks here so far; with all of them the node is done."""
        answer = self.api.post(f"/agent/v1/slurm/tasks/{doc['id']}/exited", {"time": now.timestamp(), "exits": exits})
        if answer.status not in (200, 404):
            raise RuntimeError(f"exits of step tasks {doc['id']} refused: {error_message(answer)}")

    def _report_tasks(self, doc: dict, exits: list[list[int]], now: dt.datetime) -> None:
        self._tell_exits(doc, exits, now)
        for run in self.tasks.pop(doc["id"]).runs.values():
            run.mark_reported()
        self.changed = True

    def _fail_launch(self, step: dict, reason: str, now: dt.datetime) -> None:
        self._log(step, "stderr", [(now, f"slurmstepd: error: {reason}")])
        self._report(step, "batch", {"launchFailed": True}, now)
        step["phase"] = REPORTED

    def _supervise_batch(self, step: dict, work: _Work, now: dt.datetime) -> None:
        batch = work.batch
        moment = now.timestamp()
        kill_at = _kill_at(step)
        cause = step.get("stopCause")
        if cause is not None and not batch.stop_said and batch.error_file is not None:
            # slurmstepd's line for the job stopped by scancel or at its time limit (srun/out-2.txt,
            # srun-timeout/out-1.txt)
            node = step["nodeName"]
            with os.fdopen(open_append(str(batch.error_file), self.run_as(step)), "a", encoding="utf-8") as handle:
                handle.write(f"slurmstepd-{node}: error: *** JOB {step['job']['jobId']} ON {node} CANCELLED AT "
                             f"{now:%Y-%m-%dT%H:%M:%S}{f' {cause}' if cause else ''} ***\n")
            batch.stop_said = True
        if kill_at is not None and now < kill_at:
            # a preemption's GraceTime, KillWait after a time limit: the batch shell is left alone
            # (its steps got SIGTERM) and may end on its own (srun-timeout/sacct-p.txt: 1.batch COMPLETED)
            pass
        elif step["stopRequested"] and batch.stop_sent is None:
            batch.run.terminate(moment)
            batch.stop_sent = now
        elif step["stopRequested"] and now >= batch.stop_sent + self.grace:
            batch.run.kill(moment)
        plan = self._signal_due(step, now)
        if plan is not None and plan.batch_only and not batch.signalled and not step["stopRequested"]:
            batch.run.signal(plan.signum, moment, group=False)
            batch.signalled = True
        child = batch.run.child()
        if child is not None:
            rss = process_group_rss_kb(child)
            if rss is not None:
                batch.max_rss_kb = max(batch.max_rss_kb or 0, rss)
        # The exit first: the script's last lines are in its log before its exit is recorded.
        status = batch.run.exit_status(moment)
        if not ship_logs(self.api, batch.run, f"/agent/v1/slurm/{step['id']}/logs?part=batch"):
            return
        if status is None and batch.run.lost():
            self._report(step, "lost", {"reason": "the batch script's supervisor ended without an exit"}, now)
        elif (batch.run.exit_record() or {}).get("phase") == LAUNCH:
            self._report(step, "batch", {"launchFailed": True}, now)
        elif status is not None:
            exit_code, signal = (0, -status) if status < 0 else (status, 0)
            self._report(step, "batch", {"exitCode": exit_code, "signal": signal, "maxRssKb": batch.max_rss_kb}, now)
        else:
            return
        batch.run.mark_reported()
        del self.work[step["id"]]
        step["phase"] = REPORTED

    def _stop(self, pk: int) -> None:
        """Kill whatever still runs for a step whose job moved on (cancelled during its prolog,
        requeued); its output is kept, its exit is not reported."""
        work = self.work.pop(pk)
        if work.chain is not None:
            work.chain.kill()
        if work.batch is not None:
            work.batch.run.kill(dt.datetime.now(dt.UTC).timestamp())

    def shutdown(self) -> None:
        """The agent stops: prolog and epilog scripts are stopped (they run again at start-up);
        batch scripts and step tasks run on under their supervisors."""
        for pk in [pk for pk, work in self.work.items() if work.chain is not None]:
            self._stop(pk)
