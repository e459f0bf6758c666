"""``trainhub-agent``: join a machine to trainhub and run its replicas.

    trainhub-agent join --url https://trainhub.example --token thj_... [--name gpu-7] [--simulate]
    trainhub-agent run  --url https://trainhub.example [--state-dir /var/lib/trainhub-agent]
    trainhub-agent run  --url ... --token thj_...     (joins first when the state dir has no node)

The node credential a join returns is kept in ``<state-dir>/nodes/<name>.json`` (mode 0600); a
state directory may hold several nodes (simulated capacity, or ``make run``'s demo machines),
and ``run`` serves them all. The agent holds nothing else of the control plane's: no database,
no Redis, no SECRET_KEY. It imports no Django.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import pwd
import secrets
import signal
import socket
import sys
from pathlib import Path

from trainhub.agent.client import NODE_CREDENTIAL_PREFIX, ControlPlane, ControlPlaneUnreachable, error_message
from trainhub.agent.containers import detect_runtime
from trainhub.agent.discovery import machine_facts
from trainhub.agent.node import NodeAgent, NodeSettings, run_forever

VERSION = "0.1.0"
JOIN_TOKEN_ENV = "TRAINHUB_AGENT_JOIN_TOKEN"
DEFAULT_STATE_DIR = Path(os.environ.get("TRAINHUB_AGENT_STATE_DIR", "/var/lib/trainhub-agent"))
logger = logging.getLogger("trainhub.agent")


#: What a control-plane process's environment holds that a node's agent must never see.
CONTROL_PLANE_SECRETS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DJANGO_SETTINGS_MODULE", "CELERY_BROKER_URL")


def without_control_plane_secrets(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name not in CONTROL_PLANE_SECRETS}


class AgentError(Exception):
    """Something the admin must fix; printed without a stack trace."""


def _identity_path(state_dir: Path, name: str) -> Path:
    return state_dir / "nodes" / f"{name}.json"


def identities(state_dir: Path) -> list[dict]:
    directory = state_dir / "nodes"
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))] if directory.is_dir() else []


def join(*, url: str, token: str, name: str, state_dir: Path, simulate: bool = False, address: str | None = None,
         verify: bool | str = True, nvidia_smi: str | None = None) -> dict:
    """Trade a join token for this node's credential and keep it; returns the stored identity."""
    path = _identity_path(state_dir, name)
    if path.exists():
        return json.loads(path.read_text())
    facts = machine_facts(control_plane_url=url, address=address, simulate=simulate, runtime="subprocess",
                          version=VERSION, nvidia_smi=nvidia_smi)
    # The credential is chosen here and kept before it is sent: when the answer is lost (a network
    # error, a crash) the next try sends the same one and the control plane answers as it did.
    pending = path.with_suffix(".joining")
    if not pending.exists():
        _write_private(pending, NODE_CREDENTIAL_PREFIX + secrets.token_urlsafe(32))
    body = {"token": token, "name": name, "facts": facts, "credential": pending.read_text()}
    try:
        answer = ControlPlane(url, verify=verify).post("/agent/v1/join", body)
    except ControlPlaneUnreachable as exc:
        raise AgentError(f"cannot reach the control plane at {url}: {exc}") from None
    if answer.status != 200:
        raise AgentError(f"join refused ({answer.status}): {error_message(answer)}")
    identity = {"url": url, "node": answer.body["node"], "pool": answer.body["pool"],
                "credential": answer.body["credential"], "simulate": simulate, "address": facts["address"],
                "pollSeconds": answer.body["pollSeconds"], "heartbeatSeconds": answer.body["heartbeatSeconds"]}
    _write_private(path, json.dumps(identity))
    pending.unlink()
    return identity


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all, readable by this user alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    descriptor = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(path.with_suffix(".tmp"), path)


def _replica_user(name: str | None) -> dict | None:
    if not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise AgentError(f"--replica-user {name}: no such user on this machine") from None
    if entry.pw_uid == 0:
        raise AgentError("--replica-user must not be root")
    return {"name": name, "uid": entry.pw_uid, "gid": entry.pw_gid}


def agents_for(args: argparse.Namespace) -> list[NodeAgent]:
    nodes = identities(args.state_dir)
    if not nodes:
        raise AgentError(f"no node has joined from {args.state_dir}: run `trainhub-agent join --url URL --token TOKEN` "
                         "(an admin creates the token on the Nodes page) or pass --token to run")
    user = _replica_user(args.replica_user)
    try:
        runtime = detect_runtime(args.runtime, global_args=tuple(args.runtime_arg),
                                 insecure_registries=tuple(args.insecure_registry))
    except FileNotFoundError as exc:
        raise AgentError(str(exc)) from None
    agents = []
    for identity in nodes:
        discover = functools.partial(
            machine_facts, control_plane_url=identity["url"], address=args.address or identity.get("address"),
            simulate=identity["simulate"], runtime=runtime.kind if runtime else "subprocess", version=VERSION)
        facts = discover()
        settings = NodeSettings(work_dir=args.work_dir or args.state_dir / "work", state_dir=args.state_dir,
                                grace_seconds=args.grace, heartbeat_seconds=identity.get("heartbeatSeconds", 10.0),
                                output_roots=tuple(args.output_root), replica_user=user, runtime=runtime,
                                isolate=args.isolate, facts=facts, discover=discover, poll_seconds=args.poll_seconds,
                                long_poll=args.long_poll, long_poll_seconds=args.long_poll_seconds,
                                srun_url=args.srun_url)
        api = ControlPlane(args.url or identity["url"], identity["credential"], verify=args.verify)
        agents.append(NodeAgent(name=identity["node"], control_plane=api, settings=settings))
    return agents


def _seconds(low: float, high: float):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"seconds from {low:g} to {high:g}")
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainhub-agent", description="trainhub's node agent")
    parser.add_argument("--version", action="version", version=f"trainhub-agent {VERSION}")
    commands = parser.add_subparsers(dest="command")
    for name in ("join", "run"):
        command = commands.add_parser(name)
        command.add_argument("--url", required=name == "join", help="the control plane's URL")
        command.add_argument("--token", required=name == "join" and not os.environ.get(JOIN_TOKEN_ENV),
                             default=os.environ.get(JOIN_TOKEN_ENV) or None,
                             help=f"a join token (thj_...) from an admin (or ${JOIN_TOKEN_ENV})")
        command.add_argument("--name", default=socket.gethostname().split(".")[0],
                             help="this node's name (default: the host name)")
        command.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                             help="where the node credential and replica records live (default %(default)s)")
        command.add_argument("--simulate", action="store_true",
                             help="stand in for hardware this machine does not have: claim the pool's GPUs")
        command.add_argument("--address", help="the address peers reach this machine on (default: discovered)")
        command.add_argument("--ca-bundle", dest="verify", default=True,
                             help="CA bundle to verify the control plane's certificate with")
        command.add_argument("--nvidia-smi", help="path of nvidia-smi (default: found on PATH)")
    run = commands.choices["run"]
    run.add_argument("--work-dir", type=Path, help="where replicas' working directories go (default <state-dir>/work)")
    run.add_argument("--poll-seconds", type=_seconds(0.1, 60), default=1.0,
                     help="the sync period: seconds between rounds while replicas run here, and between "
                          "assignment polls where the control plane offers no long poll (default %(default)s)")
    run.add_argument("--long-poll", action=argparse.BooleanOptionalAction, default=True,
                     help="wait for new assignments on the control plane's long poll where it announces one "
                          "(default: on; --no-long-poll polls every --poll-seconds)")
    run.add_argument("--long-poll-seconds", type=_seconds(1, 30), default=25.0,
                     help="the longest an idle node's long poll waits (default %(default)s). A held long poll "
                          "counts as the node's contact: while it answers, the agent heart-beats when its "
                          "replicas or facts change and every 300 s, else every heartbeatSeconds from join")
    run.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL (default 10)")
    run.add_argument("--output-root", type=Path, action="append", default=[],
                     help="a directory file:// output URIs may point under (repeatable)")
    run.add_argument("--replica-user", help="run replicas as this unprivileged user (when the agent runs as root)")
    run.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=os.geteuid() == 0,
                     help="run each project's replicas as its own unprivileged uid with directories only it can "
                          "read (default: on when the agent runs as root)")
    run.add_argument("--runtime", default="auto",
                     help="podman, docker, a path to either, subprocess (run command + args on the host), or auto "
                          "(default: podman, else docker, else subprocess)")
    run.add_argument("--runtime-arg", action="append", default=[],
                     help="a global flag for the runtime, e.g. --runtime-arg=--cgroup-manager=cgroupfs (repeatable)")
    run.add_argument("--insecure-registry", action="append", default=[], metavar="HOST:PORT",
                     help="a registry reached over plain HTTP (repeatable)")
    run.add_argument("--srun-url", help="the control plane's URL as srun in a Slurm batch script reaches it "
                                        "(default: --url)")
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(message)s")
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 2
    try:
        if args.token and not _identity_path(args.state_dir, args.name).exists():
            identity = join(url=args.url, token=args.token, name=args.name, state_dir=args.state_dir,
                            simulate=args.simulate, address=args.address, verify=args.verify,
                            nvidia_smi=args.nvidia_smi)
            print(f"node {identity['node']} joined pool {identity['pool']}; credential kept in "
                  f"{_identity_path(args.state_dir, identity['node'])}", flush=True)
        if args.command == "join":
            return 0
        agents = agents_for(args)
    except AgentError as exc:
        print(f"trainhub-agent: {exc}", file=sys.stderr)
        return 1
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    print(f"trainhub-agent serving {len(agents)} node(s): {', '.join(agent.name for agent in agents)}", flush=True)
    run_forever(agents, stopping=stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
