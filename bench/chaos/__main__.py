"""``python -m bench.chaos [--short] [--only NAME] [--allow-flush]``: run the reliability drills.

Prints what each drill did and every invariant check, writes all of it to
``var/chaos/chaos-<UTC timestamp>.json`` and ``var/chaos/latest.json`` (with each drill's process
logs under ``var/chaos/logs/<drill>/``), and exits 1 if any invariant was violated.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
import traceback

from bench.chaos.cluster import REPO_ROOT, Cluster
from bench.chaos.drills import DRILLS, FULL, SHORT, DrillResult
from bench.chaos.invariants import Check
from bench.environment import BenchSetupError, machine_description
from bench.report import write_results

RESULTS_DIR = REPO_ROOT / "var" / "chaos"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description="Run trainhub's reliability drills.")
    parser.add_argument("--short", action="store_true", default=os.environ.get("CHAOS_SHORT", "") not in ("", "0"),
                        help="fewer kills, a smaller load (CI; well under 3 minutes); also CHAOS_SHORT=1")
    parser.add_argument("--only", action="append", metavar="NAME", choices=list(DRILLS),
                        help="run only this drill (repeatable): " + ", ".join(DRILLS))
    parser.add_argument("--allow-flush", action="store_true",
                        help="DATABASE_URL and REDIS_URL point at throwaway stores every drill may flush "
                             "(FLUSHDB of that Redis database only)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = SHORT if args.short else FULL
    started = dt.datetime.now(dt.UTC)
    try:
        cluster = Cluster.create(allow_flush=args.allow_flush)
    except BenchSetupError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    machine = machine_description()
    print(f"trainhub chaos drills ({'short' if args.short else 'full'}) - {started:%Y-%m-%d %H:%M:%S} UTC")
    print(f"machine: {machine['cpu_model']}, {machine['cpu_cores']} cores; Python {machine['python']}")
    print(f"stores: {cluster.database_note}\n")
    results: list[DrillResult] = []
    try:
        for name, drill in DRILLS.items():
            if args.only and name not in args.only:
                continue
            print(f"== {name}", flush=True)
            begun = time.monotonic()
            try:
                result = drill(cluster, sizes)
            except Exception as exc:  # noqa: BLE001 - a drill that cannot finish is a failed drill
                result = DrillResult(name, "did not finish")
                result.checks.append(Check("the drill ran to the end", False, f"{type(exc).__name__}: {exc}"))
                traceback.print_exc()
            result.seconds = time.monotonic() - begun
            cluster.stop_all()
            cluster.keep_logs(RESULTS_DIR / "logs" / name)
            for check in result.checks:
                print(check.line())
            print(f"  {'PASSED' if result.ok else 'FAILED'} in {result.seconds:.0f} s\n", flush=True)
            results.append(result)
    finally:
        cluster.close()
    document = {
        "started_at": started.isoformat(),
        "mode": "short" if args.short else "full",
        "sizes": vars(sizes),
        "machine": machine,
        "stores": cluster.database_note,
        "ok": all(r.ok for r in results),
        "drills": {r.name: r.to_json() for r in results},
        "total_seconds": round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1),
    }
    stamped, latest = write_results(RESULTS_DIR, document, started, prefix="chaos")
    failed = [r.name for r in results if not r.ok]
    print(f"summary written to {stamped} and {latest.name}; process logs in {RESULTS_DIR / 'logs'}")
    if failed:
        print(f"violated: {', '.join(failed)}")
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
