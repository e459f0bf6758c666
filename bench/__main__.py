"""``python -m bench [--quick] [--only NAME] [--allow-flush] [--profile]``: run, print, save.

Prints one table per benchmark and writes every figure, with a description of the machine, to
``var/bench/bench-<UTC timestamp>.json`` and ``var/bench/latest.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from typing import Any

from bench import timing
from bench.admission import bench_admission
from bench.agent_fleet import bench_agent_fleet
from bench.cli import bench_cli_array, bench_cli_sbatch_loop, bench_cli_startup
from bench.environment import (
    RESULTS_DIR,
    BenchSetupError,
    CpuClock,
    load_average,
    machine_description,
    setup_django,
    stolen_note,
)
from bench.log_volume import bench_log_volume
from bench.pages import bench_pages
from bench.report import Section, format_section, write_results
from bench.scheduler_pass import BENCHMARKS as SCHEDULER_BENCHMARKS
from bench.scheduler_pass import FULL, QUICK, Benchmark
from bench.slurm_pages import bench_slurm_pages
from bench.slurm_priority import bench_slurm_priority
from bench.slurm_submit import bench_slurm_submit
from bench.slurm_vs_real import bench_slurm_vs_real
from bench.submission import bench_rest_clients, bench_rest_submit, bench_rest_submit_cpu

BENCHMARKS = (*SCHEDULER_BENCHMARKS, Benchmark("admission", bench_admission, needs_database=True),
              Benchmark("pages", bench_pages, needs_database=True),
              Benchmark("rest_submit_cpu", bench_rest_submit_cpu, needs_database=True),
              Benchmark("rest_submit", bench_rest_submit, needs_database=True),
              Benchmark("rest_clients", bench_rest_clients, needs_database=True),
              Benchmark("slurm_priority", bench_slurm_priority, needs_database=False),
              Benchmark("slurm_pages", bench_slurm_pages, needs_database=True),
              Benchmark("slurm_submit", bench_slurm_submit, needs_database=True),
              Benchmark("slurm_vs_real", bench_slurm_vs_real, needs_database=True),
              Benchmark("cli_startup", bench_cli_startup, needs_database=False),
              Benchmark("cli_sbatch_loop", bench_cli_sbatch_loop, needs_database=True),
              Benchmark("cli_array", bench_cli_array, needs_database=True),
              Benchmark("agent_fleet", bench_agent_fleet, needs_database=True),
              Benchmark("log_volume", bench_log_volume, needs_database=True))
#: Names --only also takes, each for the benchmarks of one thing.
GROUPS = {"cli": ("cli_startup", "cli_sbatch_loop", "cli_array")}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Run trainhub's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="small sizes (13 minutes on a 2-core machine at load 5-10, 2026-12-05: admission and pages take half)")
    groups = ", ".join(f"{name} ({', '.join(names)})" for name, names in GROUPS.items())
    parser.add_argument("--only", action="append", metavar="NAME", choices=[*(b.name for b in BENCHMARKS), *GROUPS],
                        help="run only this benchmark (repeatable): " + ", ".join(b.name for b in BENCHMARKS)
                        + f"; or a group: {groups}")
    parser.add_argument("--allow-flush", action="store_true",
                        help="DATABASE_URL and REDIS_URL point at throwaway stores the benchmarks may migrate "
                             "and flush (FLUSHDB of that Redis database only)")
    parser.add_argument("--profile", action="store_true",
                        help=f"run every timed call under cProfile; .prof files go to {RESULTS_DIR} "
                             "(times then include the profiler's overhead)")
    return parser.parse_args(argv)


def selected_benchmarks(only: list[str] | None) -> list[Benchmark]:
    """The benchmarks --only names, directly or by their group; all of them without --only."""
    names = {name for chosen in only or () for name in GROUPS.get(chosen, (chosen,))}
    return [benchmark for benchmark in BENCHMARKS if not names or benchmark.name in names]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    selected = selected_benchmarks(args.only)
    sizes = QUICK if args.quick else FULL
    started = dt.datetime.now(dt.UTC)
    database_note = redis_note = "not used"
    if any(b.needs_database for b in selected):
        try:
            stores = setup_django(allow_flush=args.allow_flush)
            database_note, redis_note = stores.database.throwaway_note, stores.redis.note
        except BenchSetupError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 2
    if args.profile:
        timing.enable_profiling(RESULTS_DIR)

    machine = machine_description()
    mode = "quick" if args.quick else "full"
    print(f"trainhub benchmarks ({mode}) - {started:%Y-%m-%d %H:%M:%S} UTC")
    print(f"machine: {machine['cpu_model']}, {machine['cpu_cores']} cores; Python {machine['python']}; "
          f"Django {machine['django']}")
    print(f"database: {database_note}")
    print(f"redis: {redis_note}")
    print(f"load average (1/5/15 min): {' / '.join(map(str, machine['load_average']))}")
    if args.profile:
        print("profiling: ON - times include cProfile overhead")
    print()

    sections: dict[str, Any] = {}
    for benchmark in selected:
        begun, clock = time.perf_counter(), CpuClock.read()
        section: Section = benchmark.run(sizes)
        elapsed = time.perf_counter() - begun
        stolen = CpuClock.stolen_share_from(clock)
        print(format_section(section))
        print(f"  ({benchmark.name}: {elapsed:.1f} s including setup; load average after: "
              f"{' / '.join(map(str, load_average()))}{stolen_note(stolen)})")
        print()
        sections[benchmark.name] = {**section.to_json(), "wall_seconds": elapsed, "load_average_after": load_average(),
                                    "cpu_stolen_share": stolen}

    document = {
        "started_at": started.isoformat(),
        "mode": mode,
        "sizes": vars(sizes),
        "profiled": args.profile,
        "machine": machine,
        "database_note": database_note,
        "redis_note": redis_note,
        "benchmarks": sections,
        "total_seconds": (dt.datetime.now(dt.UTC) - started).total_seconds(),
    }
    stamped, latest = write_results(RESULTS_DIR, document, started)
    print(f"figures written to {stamped} and {latest.name}")
    for label, path in timing.profiles.items():
        print(f"\n--- profile {label} ({path}) ---")
        print(timing.profile_summary(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
