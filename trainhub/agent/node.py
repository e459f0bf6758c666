"""One joined node's agent loop: fence, start, supervise and report its replicas.

``tick(now)`` does one round, so tests step it deterministically; ``trainhub-agent run`` calls
it in a loop for every node identity in its state directory. Each round:
1. fetch the node's assignments (a conditional GET: 304 while nothing changed, and a full fetch
   every ``full_sync_seconds`` in case a wake-up was lost), unless the long poll between rounds
   (``wait_for_work``) just answered;
2. fencing: stop every local replica the control plane no longer lists for this node, and start
   nothing new while one of them still runs;
3. start the listed replicas it does not run yet, each under its own supervisor;
4. ship each replica's new log lines, stop those asked to stop (SIGTERM, SIGKILL after the
   grace period), report those that ended, with their outputs;
5. heart-beat with the replicas it sees running and its facts: at once when either changed (a
   replica that ended waits for its exit report instead) or when the assignments say the node's
   state is not what the last heartbeat was answered; otherwise every ``heartbeat_seconds`` while
   it polls, but only every ``long_poll_heartbeat_seconds`` while it long-polls, since the
   control plane counts a held long poll as the node's contact (``trainhub.inventory.contact``).
   The facts are discovered afresh every ``facts_seconds``.
A failure preparing, starting or reporting one replica is that replica's failure: it is logged,
reported where it can be, and never stops the round for the others.

Between rounds ``wait_for_work`` long-polls the assignments where the control plane announces a
long poll (a ``Link: <...>; rel="long-poll"`` header on its assignments answer): the request
returns the moment the node's work changes, so a placement starts at once, and otherwise after
the pause - ``poll_seconds`` while replicas or Slurm steps run here (their logs and exits are
watched every round), else until the next heartbeat is due (at most ``long_poll_seconds``). A
control plane that announces none (an older one), or whose long poll fails, is polled
conditionally every ``poll_seconds`` instead, and the long poll is tried again a full-sync period
later.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainhub.agent.client import ControlPlane, ControlPlaneUnreachable, error_message
from trainhub.agent.containers import GCS_MOUNT, ContainerRuntime, env_file_text, write_registry_auth
from trainhub.agent.environment import NotRunnable, ReplicaContext, expand, replica_argv, replica_environment
from trainhub.agent.outputs import OutputPathRefused, collect_outputs, prepare_outputs
from trainhub.agent.replicas import ReplicaRun, ship_logs
from trainhub.agent.slurm import TERMINAL_POLL_SECONDS, SlurmNodeWork

logger = logging.getLogger("trainhub.agent")

SIMULATED = "simulated"


#: An idle agent's long poll asks for a random share of ``long_poll_seconds``, at least this one, so
#: agents that started together (a control-plane restart reconnects them all at once) do not go on
#: ending their waits together; kube-apiserver spreads its watches' timeouts the same way.
LONG_POLL_SPREAD = 0.8


def spread_wait(longest: float, draw: float) -> float:
    """The wait an idle agent asks for, given ``draw`` in [0, 1): between LONG_POLL_SPREAD x and 1 x ``longest``."""
    return longest * (LONG_POLL_SPREAD + (1 - LONG_POLL_SPREAD) * draw)


@dataclass
class NodeSettings:
    work_dir: Path
    state_dir: Path
    grace_seconds: float = 10.0
    #: The heartbeat's period while the agent polls (no long poll, or a failed one).
    heartbeat_seconds: float = 10.0
    #: The heartbeat's period while the long poll answers: it counts as contact, so this beat only
    #: confirms the running replicas and facts (a change of either is sent at once) and refreshes
    #: the database's record should Redis have lost the long poll's contacts.
    long_poll_heartbeat_seconds: float = 300.0
    full_sync_seconds: float = 30.0
    #: The pause between rounds while replicas run here, or without a long poll (the sync period).
    poll_seconds: float = 1.0
    #: Long-poll the assignments where the control plane offers it; the longest wait asked for.
    long_poll: bool = True
    long_poll_seconds: float = 25.0
    #: The full fetch's period while long-polling: each long poll reads the wake-up counter afresh, so
    #: only a bump lost with Redis unreachable at commit time (logged there) waits for this fetch.
    long_poll_full_sync_seconds: float = 300.0
    #: Where file:// output URIs may point (gs:// maps below work_dir/gcs).
    output_roots: tuple[Path, ...] = ()
    #: The uid/gid every replica runs as (--replica-user); None: the project's own uid (with
    #: ``isolate``) or the agent's user.
    replica_user: dict | None = None
    #: Run each project's replicas as its own unprivileged uid, in directories only it can read.
    isolate: bool = False
    #: podman or docker; None runs command + args on the host (the subprocess executor).
    runtime: ContainerRuntime | None = None
    facts: dict = field(default_factory=dict)
    #: Discovers the machine's facts afresh (None: ``facts`` never change); every ``facts_seconds``.
    discover: Callable[[], dict] | None = None
    facts_seconds: float = 60.0
    #: The control plane's URL as srun in a batch script reaches it (None: the agent's own URL).
    srun_url: str | None = None


@dataclass
class _Handle:
    run: ReplicaRun
    stop_sent: float | None = None


class NodeAgent:
    def __init__(self, *, name: str, control_plane: ControlPlane, settings: NodeSettings):
        self.name = name
        self.api = control_plane
        self.settings = settings
        self.replica_dir = settings.state_dir / "replicas" / name
        self.replica_dir.mkdir(parents=True, exist_ok=True)
        # Replica records hold their environments: only the agent (and its supervisors) read them.
        self.replica_dir.parent.chmod(0o700)
        self.handles: dict[int, _Handle] = {}
        self.assignments: dict[str, Any] = {"replicas": [], "slurm": []}
        self.etag = ""
        self.last_full_sync = 0.0
        #: Where the control plane long-polls this node's assignments ("" where it announced none).
        self.long_poll_url = ""
        self.long_poll_retry_at = 0.0
        #: The long poll answered since the last round: the round need not fetch.
        self.synced = False
        self.last_heartbeat = 0.0
        self.reported_running: list[int] | None = None
        self.reported_facts: dict | None = None
        self.facts_checked: float | None = None
        #: The node's state as the last heartbeat was answered; assignments saying otherwise make one due.
        self.reported_state = ""
        self.heartbeat_due = False
        self.slurm = SlurmNodeWork(api=control_plane, work_dir=settings.work_dir,
                                   grace=dt.timedelta(seconds=settings.grace_seconds),
                                   run_dir=settings.state_dir / "slurm" / name, srun_url=settings.srun_url,
                                   run_as=self._run_as)
        self._adopt()

    # Start-up ---------------------------------------------------------------------------------

    def _adopt(self) -> None:
        """Re-attach to the replicas a previous agent started here (they kept running)."""
        for directory in sorted(self.replica_dir.iterdir()):
            if directory.name.isdigit():
                run = ReplicaRun(directory)
                if not run.reported:
                    self.handles[run.replica_id] = _Handle(run)
        if self.handles:
            logger.info("node %s: re-adopted %d replica(s) from before a restart", self.name, len(self.handles))

    # One round --------------------------------------------------------------------------------

    def tick(self, *, now: dt.datetime) -> None:
        moment = now.timestamp()
        self._sync(moment)
        listed = {doc["id"]: doc for doc in self.assignments["replicas"]}
        fenced_running = self._fence(listed, moment)
        if not fenced_running:
            for replica_id, doc in listed.items():
                if replica_id not in self.handles:
                    self._launch(doc, moment)
        for replica_id in list(self.handles):
            try:
                self._supervise(replica_id, listed.get(replica_id), moment)
            except ControlPlaneUnreachable:
                raise
            except Exception:  # noqa: BLE001 - one replica's trouble never stalls the others
                logger.exception("node %s: supervising replica %s failed; retrying next round", self.name, replica_id)
        self.slurm.tick(self.assignments["slurm"], now=now)
        if self.slurm.changed:
            self.slurm.changed = False
            self.resync()
        self._heartbeat(moment)

    def _sync(self, moment: float) -> None:
        if self.synced:
            self.synced = False
            return
        answer = self.api.get("/agent/v1/assignments", etag=self._etag_to_send(moment, self.settings.full_sync_seconds))
        if answer.status in (200, 304):
            self.long_poll_url = answer.links.get("long-poll", "") if self.settings.long_poll else ""
        self._take(answer, moment)

    def _etag_to_send(self, moment: float, full_sync_seconds: float) -> str:
        return "" if moment - self.last_full_sync >= full_sync_seconds else self.etag

    def _take(self, answer, moment: float) -> None:
        if answer.status == 304:
            return
        if answer.status != 200:
            raise ControlPlaneUnreachable(f"assignments: {_refusal(answer)}")
        self.assignments, self.etag, self.last_full_sync = answer.body, answer.etag, moment
        if answer.body.get("state", self.reported_state) != self.reported_state:
            self.heartbeat_due = True

    def pause_seconds(self) -> float:
        """The pause between rounds while work runs here: shorter while a terminal's user waits."""
        return min(self.settings.poll_seconds, TERMINAL_POLL_SECONDS) if self.slurm.interactive else \
            self.settings.poll_seconds

    def wait_for_work(self) -> bool:
        """Long-poll the assignments until they change or the pause is over; False where there is no
        long poll to wait on (the caller then sleeps ``poll_seconds`` and the next round polls)."""
        moment = time.time()
        if not self._long_polling(moment):
            return False
        if self.handles or self.assignments["slurm"]:
            wait = self.pause_seconds()
        else:
            wait = min(spread_wait(self.settings.long_poll_seconds, random.random()),
                       self.last_heartbeat + self.settings.long_poll_heartbeat_seconds - moment,
                       self.last_full_sync + self.settings.long_poll_full_sync_seconds - moment)
        etag = self._etag_to_send(moment, self.settings.long_poll_full_sync_seconds)
        try:
            answer = self.api.long_poll(self.long_poll_url, etag=etag, wait=max(0.0, wait))
        except ControlPlaneUnreachable as exc:
            return self._long_poll_failed(moment, str(exc))
        if answer.status not in (200, 304, 401):
            return self._long_poll_failed(moment, f"HTTP {answer.status}: {error_message(answer)}")
        self._take(answer, time.time())
        self.synced = True
        return True

    def _long_polling(self, moment: float) -> bool:
        return bool(self.long_poll_url) and moment >= self.long_poll_retry_at

    def _long_poll_failed(self, moment: float, problem: str) -> bool:
        logger.warning("node %s: long poll at %s failed (%s); polling every %g s for %g s", self.name,
                       self.long_poll_url, problem, self.settings.poll_seconds, self.settings.full_sync_seconds)
        self.long_poll_retry_at = moment + self.settings.full_sync_seconds
        return False

    def resync(self) -> None:
        """Fetch in full next round (after a report that moved this node's work on)."""
        self.etag = ""

    def _fence(self, listed: dict[int, dict], moment: float) -> bool:
        """Stop local replicas the control plane does not list; True while any of them still runs."""
        still_running = False
        for replica_id, handle in self.handles.items():
            if replica_id in listed or not handle.run.running():
                continue
            still_running = True
            if handle.stop_sent is None:
                logger.warning("node %s: replica %s is no longer assigned here; stopping it", self.name, replica_id)
                handle.run.terminate(moment)
                handle.stop_sent = moment
            elif moment - handle.stop_sent >= self.settings.grace_seconds:
                handle.run.kill(moment)
        return still_running

    # Launching --------------------------------------------------------------------------------

    def _launch(self, doc: dict, moment: float) -> None:
        directory = self.replica_dir / str(doc["id"])
        try:
            run = self._start(doc, directory, moment)
        except Exception as exc:  # noqa: BLE001 - reported as this replica's failure
            logger.exception("node %s: cannot start replica %s", self.name, doc["id"])
            run = ReplicaRun.failed(directory, reason=f"the node agent could not start the replica: {exc}", now=moment)
        self.handles[doc["id"]] = _Handle(run)
        answer = self.api.post(f"/agent/v1/replicas/{doc['id']}/started", {"time": moment})
        if answer.status == 200 and run.running():
            self._reported(add=doc["id"])
        elif answer.status != 200:
            logger.warning("node %s: started report for replica %s refused: %s", self.name, doc["id"],
                           error_message(answer))

    def _reported(self, *, add: int | None = None, remove: int | None = None) -> None:
        """A start or exit report the control plane took already told it what a heartbeat would: the
        replica now runs here, or no longer does. So that change alone sends no heartbeat (in a
        fleet, every placement would otherwise cost a heartbeat at its start and another at its end)."""
        if self.reported_running is not None:
            self.reported_running = sorted((set(self.reported_running) | {add}) - {remove, None})

    def _context(self, doc: dict, work_dir: Path) -> ReplicaContext:
        context = doc["context"]
        return ReplicaContext(
            job_id=context["jobId"], project_number=context["projectNumber"], spec=context["spec"],
            pool_index=context["poolIndex"], replica_index=context["replicaIndex"],
            hosts={int(index): hosts for index, hosts in context["hosts"].items()},
            gpu_indices=list(doc["gpuIndices"]), trial_id=context.get("trialId"),
            work_dir=str(work_dir), storage_root=str(self.settings.work_dir / "gcs"),
            master_port=context.get("masterPort") or ReplicaContext.master_port, cluster_port=context.get("clusterPort") or ReplicaContext.cluster_port,
        )

    def _start(self, doc: dict, directory: Path, moment: float) -> ReplicaRun:
        work_dir = self.settings.work_dir / "jobs" / doc["context"]["jobId"] / f"{doc['taskName']}-{doc['attempt']}"
        ctx = self._context(doc, work_dir)
        env = replica_environment(ctx)
        if doc["executor"] == SIMULATED:
            return ReplicaRun.simulate(directory, started=moment, runtime=float(doc["simulatedRuntimeSeconds"]),
                                       announce=[f"simulated replica {doc['taskName']} on node {self.name}",
                                                 f"CLUSTER_SPEC={env['CLUSTER_SPEC']}"])
        user = self._run_as(doc)
        try:
            outputs = prepare_outputs(env, roots=self._output_roots(), owner=user) if doc["primary"] else None
            if self.settings.runtime is None:
                argv = replica_argv(ctx, env)
        except (NotRunnable, OutputPathRefused) as exc:
            return ReplicaRun.failed(directory, reason=str(exc), now=moment)
        work_dir.mkdir(parents=True, exist_ok=True)
        if user:
            os.chown(work_dir, user["uid"], user["gid"])
            work_dir.chmod(0o700)  # another project's replica on this node cannot read it
        if self.settings.runtime is not None:
            return self._start_container(doc, ctx, env, directory, work_dir, outputs, moment, user)
        return ReplicaRun.start(directory, argv=argv, env={**self._base_env(work_dir), **env}, cwd=work_dir,
                                user=user, outputs=outputs)

    def _run_as(self, doc: dict) -> dict | None:
        if self.settings.replica_user:
            return self.settings.replica_user
        return doc.get("runAs") if self.settings.isolate else None

    def _start_container(self, doc: dict, ctx: ReplicaContext, env: dict[str, str], directory: Path,
                         work_dir: Path, outputs: dict | None, moment: float, user: dict | None) -> ReplicaRun:
        runtime = self.settings.runtime
        pool = ctx.spec["jobSpec"]["workerPoolSpecs"][ctx.pool_index]
        if "containerSpec" in pool:
            container = pool["containerSpec"]
            image = container["imageUri"]
            command = [expand(item, env) for item in container.get("command", [])]
            args = [expand(item, env) for item in container.get("args", [])]
        else:
            python = pool["pythonPackageSpec"]
            image = python["executorImageUri"]
            # The packages are installed in the container, then the module runs with the args as "$@"
            # (never interpolated into the script).
            env["TRAINHUB_PACKAGES"] = " ".join(
                f"{GCS_MOUNT}/{uri[len('gs://'):]}" if uri.startswith("gs://") else uri
                for uri in python.get("packageUris", []))
            env["TRAINHUB_MODULE"] = python["pythonModule"]
            command = ["sh", "-c", 'if [ -n "$TRAINHUB_PACKAGES" ]; then python3 -m pip install --quiet '
                       '--no-cache-dir $TRAINHUB_PACKAGES || exit 1; fi; exec python3 -m "$TRAINHUB_MODULE" "$@"',
                       "trainhub-replica"]
            args = [expand(item, env) for item in python.get("args", [])]
        if doc["gpuIndices"]:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in range(len(doc["gpuIndices"])))
        env.setdefault("PYTHONUNBUFFERED", "1")
        env_file = directory / "container.env"
        directory.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(env_file_text(env))
        gcs = self.settings.work_dir / "gcs"
        gcs.mkdir(parents=True, exist_ok=True)
        mounts = [(str(work_dir), str(work_dir)), (str(gcs), GCS_MOUNT), (str(gcs), str(gcs)),
                  *((str(root), str(root)) for root in self.settings.output_roots if root.is_dir())]
        name = f"trainhub-{self.name}-{doc['id']}"
        argv = runtime.run_argv(name=name, image=image, command=command, args=args, env_file=str(env_file),
                                user=f"{user['uid']}:{user['gid']}" if user else None,
                                gpu_indices=list(doc["gpuIndices"]), mounts=mounts, workdir=str(work_dir))
        ReplicaRun.note(directory, moment, f"trainhub-agent: pulling {image} with {runtime.kind} on node {self.name}")
        runtime_env, authfile = dict(os.environ), None
        if doc.get("registryLogin"):
            authfile = write_registry_auth(directory / "registry-auth", doc["registryLogin"])
            runtime_env["DOCKER_CONFIG"] = str(authfile.parent)  # where docker looks; podman takes --authfile
        return ReplicaRun.start(directory, argv=argv, env=runtime_env, cwd=work_dir, outputs=outputs,
                                prepare=[runtime.pull_argv(image, str(authfile) if authfile else None)],
                                container={"name": name, "signal": [*runtime.base(), "kill", "--signal"],
                                           "remove": runtime.remove_argv(name)})

    def _output_roots(self) -> tuple[Path, ...]:
        return (self.settings.work_dir / "gcs", *self.settings.output_roots)

    def _base_env(self, work_dir: Path) -> dict[str, str]:
        """A clean environment: a PATH and a HOME, nothing of the agent's own (no credentials)."""
        return {"PATH": os.environ.get("TRAINHUB_REPLICA_PATH", "/usr/local/bin:/usr/bin:/bin"),
                "HOME": str(work_dir), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}

    # Supervising ------------------------------------------------------------------------------

    def _supervise(self, replica_id: int, doc: dict | None, moment: float) -> None:
        handle = self.handles[replica_id]
        if doc is not None:
            if doc["stopRequested"] and handle.stop_sent is None:
                handle.run.terminate(moment)
                handle.stop_sent = moment
            elif doc["stopRequested"] and moment - handle.stop_sent >= self.settings.grace_seconds:
                handle.run.kill(moment)
        status = handle.run.exit_status(moment)
        lost = status is None and handle.run.lost()
        if not ship_logs(self.api, handle.run, f"/agent/v1/replicas/{replica_id}/logs"):
            return
        if status is None and not lost:
            return
        body: dict[str, Any] = {"time": moment, "exitCode": status}
        ended = handle.run.exit_record() or {}
        if ended.get("phase") == "prepare":
            body["startError"] = f"the image could not be pulled: {ended.get('message') or 'no message'}"
        if lost:
            handle.run.clean_up()
            body = {"time": moment, "exitCode": None, "lostReason": "its supervisor ended without recording an exit"}
        elif handle.run.outputs is not None:
            body["outputs"] = collect_outputs(handle.run.outputs)
        answer = self.api.post(f"/agent/v1/replicas/{replica_id}/exited", body)
        if answer.status in (200, 404):  # 404: the control plane forgot it (a node removed meanwhile)
            handle.run.mark_reported()
            del self.handles[replica_id]
            self._reported(remove=replica_id)
            if answer.status == 200 and answer.etag:
                self._take(answer, moment)  # the answer is the node's assignments without the replica
            else:
                self.resync()  # a control plane older than that answer: fetch them next round
        else:
            logger.warning("node %s: exit report of replica %s refused: %s", self.name, replica_id, error_message(answer))

    def _heartbeat(self, moment: float) -> None:
        running = sorted(replica_id for replica_id, handle in self.handles.items() if handle.run.running())
        facts = self._facts(moment)
        period = (self.settings.long_poll_heartbeat_seconds if self._long_polling(moment)
                  else self.settings.heartbeat_seconds)
        if (not self._running_changed(running) and facts == self.reported_facts and not self.heartbeat_due
                and moment - self.last_heartbeat < period):
            return
        body: dict[str, Any] = {"time": moment, "running": running}
        if facts != self.reported_facts:
            body["facts"] = facts
        answer = self.api.post("/agent/v1/heartbeat", body)
        if answer.status != 200:
            raise ControlPlaneUnreachable(f"heartbeat: {_refusal(answer)}")
        self.reported_facts, self.reported_running, self.last_heartbeat = facts, running, moment
        self.reported_state, self.heartbeat_due = str(answer.body.get("state", "")), False

    def _running_changed(self, running: list[int]) -> bool:
        """Whether the replicas running here differ from the last heartbeat's in a way no report will
        say. A replica that ended after this round supervised it is still held: the next round's
        exit report tells the control plane, so its ending alone is no reason to heart-beat."""
        if self.reported_running is None:
            return True
        exit_unreported = self.handles.keys() - set(running)
        return bool((set(running) ^ set(self.reported_running)) - exit_unreported)

    def _facts(self, moment: float) -> dict:
        """The machine's facts, discovered afresh once ``facts_seconds`` have passed since the last look."""
        if self.facts_checked is None:
            self.facts_checked = moment
        elif self.settings.discover is not None and moment - self.facts_checked >= self.settings.facts_seconds:
            self.facts_checked = moment
            try:
                self.settings.facts = self.settings.discover()
            except Exception:  # noqa: BLE001 - the facts last found stand; the next look retries
                logger.exception("node %s: discovering the machine's facts failed", self.name)
        return self.settings.facts

    def shutdown(self) -> None:
        """The agent stops: replicas, batch scripts and step tasks keep running under their supervisors;
        prolog and epilog scripts are stopped (they run again when it starts)."""
        self.slurm.shutdown()


def _refusal(answer) -> str:
    if answer.status == 401:
        return ("this node's credential was refused: an admin revoked it or removed the node; join again with a "
                "new join token (trainhub-agent join --token ...)")
    return f"HTTP {answer.status}: {error_message(answer)}"


def run_forever(agents: list[NodeAgent], *, stopping: list) -> None:
    """Serve every node on its own thread (a long poll holds one node's thread, never the others')
    until ``stopping`` holds something; then stop each node's work once its thread is out."""
    threads = [threading.Thread(target=_serve, args=(agent, stopping), name=f"node-{agent.name}", daemon=True)
               for agent in agents]
    for thread in threads:
        thread.start()
    while not stopping:
        time.sleep(0.2)
    for agent, thread in zip(agents, threads):
        # A node with work here waits at most poll_seconds; an idle one has nothing to stop.
        thread.join(timeout=agent.settings.poll_seconds + agent.api.timeout)
        if not thread.is_alive():
            agent.shutdown()


def _serve(agent: NodeAgent, stopping: list) -> None:
    while not stopping:
        started = time.monotonic()
        waited = False
        try:
            agent.tick(now=dt.datetime.now(dt.UTC))
            waited = agent.wait_for_work()
        except ControlPlaneUnreachable as exc:
            logger.warning("node %s: control plane unreachable (%s); retrying", agent.name, exc)
        except Exception:  # noqa: BLE001 - one bad round must not kill the node's agent
            logger.exception("node %s: agent round failed; retrying", agent.name)
        if not waited:
            time.sleep(max(0.0, agent.pause_seconds() - (time.monotonic() - started)))
