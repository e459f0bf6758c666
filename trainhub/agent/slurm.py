"""The Slurm side of a node agent (slurmd's part): on each of its nodes it runs, for every job the
scheduler allocated there, the cluster's prolog scripts, then the batch script on the batch host,
then the epilog scripts, and reports each step to trainhub.slurm.services.lifecycle.

- Scripts are files run as ``["/bin/bash", path]`` (argument lists, never a shell string), with
  Slurm's environment (trainhub.slurm.jobenv); prolog/epilog get no inherited PATH, as in Slurm.
- Prolog scripts run one after another and stop at the first failure (PrologFlags=Alloc: on
  every node at allocation; the batch script starts when every node's prolog succeeded).
- The batch script's output goes to ``slurm-<jobid>.out`` (or --output/--error) in the job's
  working directory and to the database; prolog/epilog output to the database only.
- A job reaches a node's GPUs only after every earlier job on those GPUs has finished its epilog
  there (a preemptor waits for its victims, as Slurm waits for COMPLETING jobs).
- Simulated pools run no batch script: the job "runs" for the pool's simulated run time.
- Max RSS of the batch script's process group is sampled every tick (jobacct_gather/linux sums
  the task tree's RSS the same way).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from trainhub.agent.executors import FailedToStart, ReplicaProcess, SimulatedReplica, SubprocessReplica
from trainhub.inventory.models import Executor
from trainhub.slurm import jobenv
from trainhub.slurm.models import JobNode, NodePhase, SlurmJob
from trainhub.slurm.services import lifecycle

BASH = "/bin/bash"


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


@dataclass
class _Batch:
    process: ReplicaProcess
    pgid: int | None
    stdout: Path
    stderr: Path
    stop_sent: dt.datetime | None = None
    max_rss_kb: int | None = None


@dataclass
class _Work:
    """What runs for one JobNode now: a prolog or epilog chain, or the batch script."""

    kind: str
    chain: ScriptChain | None = None
    batch: _Batch | None = None


class SlurmNodeWork:
    def __init__(self, *, node_ids: list[int], work_dir: Path, grace: dt.timedelta):
        self.node_ids = node_ids
        self.work_dir = work_dir
        self.grace = grace
        self.work: dict[int, _Work] = {}

    # Reading ----------------------------------------------------------------------------------

    def _job_nodes(self) -> list[JobNode]:
        return list(JobNode.objects.filter(node_id__in=self.node_ids).exclude(phase=NodePhase.DONE)
                    .select_related("job__cluster", "node__pool").order_by("pk"))

    def _context(self, job_node: JobNode) -> tuple[jobenv.JobContext, jobenv.NodeContext]:
        job: SlurmJob = job_node.job
        peers = list(JobNode.objects.filter(job=job, run_index=job_node.run_index).select_related("node")
                     .order_by("-batch_host", "node__name"))
        hosts = tuple(peer.node.name for peer in peers)
        index = next(i for i, peer in enumerate(peers) if peer.pk == job_node.pk)
        submit_dir = host_path(self.work_dir, job.cluster.cluster_id, job.work_dir)
        start = job.start_time or dt.datetime.now(dt.UTC)
        stdout, stderr = self._output_paths(job_node, submit_dir)
        context = jobenv.JobContext(
            cluster_name=job.cluster.cluster_id, job_id=job.job_id, job_name=job.name, user=job.user_name,
            account=job.account, partition=job.partition, qos=job.qos, hosts=hosts,
            cpus_per_node=tuple(peer.cpus for peer in peers), num_tasks=job.num_tasks,
            restart_count=job_node.run_index, submit_dir=str(submit_dir), submit_host=hosts[0],
            stdout_path=str(stdout), stderr_path=str(stderr), comment=job.comment,
            start_epoch=int(start.timestamp()),
            end_epoch=int(start.timestamp()) + job.time_limit * 60 if job.time_limit is not None else None,
        )
        return context, jobenv.NodeContext(index=index, gpu_indices=tuple(job_node.gpu_indices))

    def _output_paths(self, job_node: JobNode, submit_dir: Path) -> tuple[Path, Path]:
        """--output/--error: relative to the working directory, or absolute on the cluster's file system."""
        job = job_node.job
        names = {"job_id": job.job_id, "job_name": job.name, "user": job.user_name, "node": job_node.node.name}

        def resolve(pattern: str) -> Path:
            path = jobenv.output_path(pattern, **names)
            return host_path(self.work_dir, job.cluster.cluster_id, path) if path.startswith("/") else submit_dir / path

        stdout = resolve(job.stdout_pattern)
        return stdout, resolve(job.stderr_pattern) if job.stderr_pattern else stdout

    def _spool(self, job_node: JobNode) -> Path:
        """slurmd's spool directory for one run of a job on one node (scripts are written here).

        Per node, as each slurmd has its own: an agent serving two nodes of one job writes each
        node's prolog and epilog while the other node's bash may still be reading its copy.
        """
        job = job_node.job
        path = (self.work_dir / "slurm-spool" / job_node.node.name / job.cluster.cluster_id
                / f"job{job.job_id}.{job_node.run_index}")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _write_scripts(self, job_node: JobNode, kind: str, scripts: list[str]) -> list[Path]:
        spool = self._spool(job_node)
        paths = []
        for index, text in enumerate(scripts):
            path = spool / f"{kind}-{index}.sh"
            path.write_text(text)
            paths.append(path)
        return paths

    # Ticking ----------------------------------------------------------------------------------

    def recover(self, *, now: dt.datetime) -> int:
        """At start-up: a batch script this agent ran before it died is lost (NODE_FAIL, requeue);
        prologs and epilogs simply run again."""
        lost = 0
        for job_node in JobNode.objects.filter(node_id__in=self.node_ids, phase=NodePhase.RUNNING, batch_host=True):
            lifecycle.job_node_lost(job_node=job_node, now=now, reason="the node agent restarted while it ran")
            lost += 1
        return lost

    def tick(self, *, now: dt.datetime) -> None:
        job_nodes = self._job_nodes()
        live = {job_node.pk for job_node in job_nodes}
        for job_node in job_nodes:
            self._advance(job_node, job_nodes, now)
        for pk in [pk for pk in self.work if pk not in live]:
            self._stop(pk)

    def _blocked(self, job_node: JobNode, job_nodes: list[JobNode]) -> bool:
        """Earlier jobs still on any of this allocation's GPUs of the node must leave first."""
        mine = set(job_node.gpu_indices)
        return any(other.pk < job_node.pk and other.node_id == job_node.node_id
                   and mine & set(other.gpu_indices) for other in job_nodes)

    def _advance(self, job_node: JobNode, job_nodes: list[JobNode], now: dt.datetime) -> None:
        work = self.work.get(job_node.pk)
        if job_node.phase == NodePhase.PROLOG:
            if work is None and not self._blocked(job_node, job_nodes):
                self._start_chain(job_node, "prolog", job_node.job.cluster.prolog_scripts, now)
            elif work is not None:
                self._poll_chain(job_node, work, now, lifecycle.job_node_prolog_finished)
        elif job_node.phase == NodePhase.RUNNING and job_node.batch_host:
            if work is None:
                self._launch_batch(job_node, now)
            else:
                self._supervise_batch(job_node, work, now)
        elif job_node.phase == NodePhase.EPILOG:
            if work is not None and work.kind != "epilog":
                self._stop(job_node.pk)
                work = self.work.get(job_node.pk)
            if work is None:
                self._start_chain(job_node, "epilog", job_node.job.cluster.epilog_scripts, now)
            elif work.kind == "epilog":
                self._poll_chain(job_node, work, now, lifecycle.job_node_epilog_finished)

    def _start_chain(self, job_node: JobNode, kind: str, scripts: list[str], now: dt.datetime) -> None:
        context, node = self._context(job_node)
        if kind == "prolog":
            env = jobenv.prolog_environment(context, node)
        else:
            job = job_node.job
            env = jobenv.epilog_environment(context, node, exit_code=job.exit_code or 0, signal=job.exit_signal)
        paths = self._write_scripts(job_node, kind, scripts)
        self.work[job_node.pk] = _Work(kind, chain=ScriptChain(paths, env, self._spool(job_node), now))

    def _poll_chain(self, job_node: JobNode, work: _Work, now: dt.datetime, report) -> None:
        code = work.chain.poll(now)
        lifecycle.job_log_append(job_node=job_node, stream=work.kind, lines=work.chain.drain())
        if code is not None:
            del self.work[job_node.pk]
            report(job_node=job_node, exit_code=code, now=now)

    def _launch_batch(self, job_node: JobNode, now: dt.datetime) -> None:
        context, node = self._context(job_node)
        env = jobenv.batch_environment(context, node)
        stdout, stderr = Path(context.stdout_path), Path(context.stderr_path)
        submit_dir = Path(context.submit_dir)
        submit_dir.mkdir(parents=True, exist_ok=True)
        stdout.parent.mkdir(parents=True, exist_ok=True)
        stderr.parent.mkdir(parents=True, exist_ok=True)
        job = job_node.job
        process: ReplicaProcess
        pgid = None
        if job_node.node.pool.executor == Executor.SIMULATED:
            process = SimulatedReplica(
                started=now, runtime=dt.timedelta(seconds=job_node.node.pool.simulated_runtime_seconds),
                announce=[f"simulated batch script of job {job.job_id} on {job_node.node.name}",
                          *(f"{name}={env[name]}" for name in sorted(env) if name.startswith("SLURM_JOB_"))])
        else:
            script = self._spool(job_node) / "slurm_script"
            script.write_text(job.script)
            try:
                # The batch script inherits the agent's basic environment (PATH, HOME, ...), as
                # sbatch exports the submitter's.
                subprocess_replica = SubprocessReplica([BASH, str(script), *job.script_args], env, submit_dir)
                process, pgid = subprocess_replica, subprocess_replica.pid
            except OSError as exc:
                process = FailedToStart(now, f"slurmstepd: error: execve(): {script}: {exc.strerror}")
        stdout.touch()
        stderr.touch()
        self.work[job_node.pk] = _Work("batch", batch=_Batch(process, pgid, stdout, stderr))

    def _supervise_batch(self, job_node: JobNode, work: _Work, now: dt.datetime) -> None:
        batch = work.batch
        if job_node.stop_requested and batch.stop_sent is None:
            batch.process.terminate()
            batch.stop_sent = now
        elif job_node.stop_requested and now >= (job_node.kill_at or batch.stop_sent + self.grace):
            batch.process.kill()
        if batch.pgid is not None:
            rss = process_group_rss_kb(batch.pgid)
            if rss is not None:
                batch.max_rss_kb = max(batch.max_rss_kb or 0, rss)
        code = batch.process.poll(now)
        self._write_output(job_node, batch)
        if code is not None:
            del self.work[job_node.pk]
            exit_code, signal = (0, -code) if code < 0 else (code, 0)
            lifecycle.job_batch_finished(job_node=job_node, exit_code=exit_code, signal=signal,
                                         max_rss_kb=batch.max_rss_kb, now=now)

    def _write_output(self, job_node: JobNode, batch: _Batch) -> None:
        lines = batch.process.drain()
        if not lines:
            return
        for stream in ("stdout", "stderr"):
            chosen = [(time, text) for name, time, text in lines if name == stream]
            if chosen:
                with open(batch.stdout if stream == "stdout" else batch.stderr, "a", encoding="utf-8") as handle:
                    handle.writelines(f"{text}\n" for _, text in chosen)
                lifecycle.job_log_append(job_node=job_node, stream=stream, lines=chosen)

    def _stop(self, pk: int) -> None:
        """Kill whatever still runs for a node whose job moved on (cancelled during its prolog,
        requeued); its output is kept, its exit is not reported."""
        work = self.work.pop(pk)
        if work.chain is not None:
            work.chain.kill()
        if work.batch is not None:
            work.batch.process.kill()

    def shutdown(self) -> None:
        for pk in list(self.work):
            self._stop(pk)
