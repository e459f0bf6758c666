"""``python -m bench.compare [BEFORE [AFTER]]``: what changed between two benchmark runs.

Every ``make bench`` writes ``var/bench/bench-<UTC timestamp>.json``. Without arguments this
compares the two newest of them; with one, that file against the newest; with two, those two.
For every benchmark in both runs it prints one table: the rows matched by the fields that name
their case (sizes, page, step; ``Section.key``), and each figure the benchmark prints as
``before -> after (change)``. A run's machine, database, load and stolen CPU come first: figures
from different machines or from a busy machine are not comparable, and the header says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.environment import RESULTS_DIR
from bench.report import Column, Section, format_section, format_value

_RUN_FILES = "bench-*.json"


class CompareError(RuntimeError):
    """The runs cannot be compared as asked; the message says why."""


def load_run(path: Path) -> dict[str, Any]:
    """A benchmark run's document, or CompareError naming the file and what is wrong with it."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise CompareError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), dict):
        raise CompareError(f"{path}: not a benchmark run (no \"benchmarks\"): make bench writes them to {RESULTS_DIR}")
    return document


def default_runs(directory: Path, before: Path | None = None) -> tuple[Path, Path]:
    """The runs to compare when not both are named: ``before`` (or the second newest run in
    ``directory``) and the newest run there."""
    runs = sorted(directory.glob(_RUN_FILES))
    if not runs or (before is None and len(runs) < 2):
        raise CompareError(f"{directory} holds {len(runs)} benchmark run(s): run make bench "
                           f"{'twice' if not runs else 'again'}, or name the two files to compare")
    return (before or runs[-2]), runs[-1]


def change(before: Any, after: Any) -> str:
    """``before -> after (+12%)`` for two figures; a side that is missing shows as "-"."""
    if before is None and after is None:
        return "-"
    if not _is_number(before) or not _is_number(after):
        return f"{format_value(before)} -> {format_value(after)}"
    if before == after:
        return f"{format_value(after)} (same)"
    relative = f" ({(after - before) / abs(before):+.0%})" if before else ""
    return f"{format_value(before)} -> {format_value(after)}{relative}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _described(section: dict[str, Any], fallback: dict[str, Any]) -> tuple[list[str], list[Column]]:
    """The key and printed columns a saved section names (runs saved before bench.compare existed
    name none: the other run's are used)."""
    for source in (section, fallback):
        if source.get("key") and source.get("columns"):
            return list(source["key"]), [Column(key, header) for key, header in source["columns"]]
    return [], []


def compare_benchmark(name: str, before: dict[str, Any], after: dict[str, Any]) -> Section:
    """One benchmark's rows from two runs, matched by their key, each printed figure as a change."""
    key, columns = _described(after, before)
    if not key:
        return Section(name=name, title=after.get("title", name), columns=[], notes=[
            "neither run saved which fields name a row (both were made before bench.compare): run make bench again"])
    figures = [column for column in columns if column.key not in key]

    def by_key(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
        return {tuple(row.get(field) for field in key): row for row in rows}

    earlier, later = by_key(before.get("rows", [])), by_key(after.get("rows", []))
    rows = []
    for case, row in later.items():
        if case not in earlier:
            continue
        compared = dict(zip(key, case, strict=True))
        compared.update({column.key: change(earlier[case].get(column.key), row.get(column.key)) for column in figures})
        rows.append(compared)
    section = Section(name=name, title=after.get("title", name), key=tuple(key),
                      columns=[column for column in columns if column.key in key] + figures, rows=rows)
    for label, only in (("only in the earlier run", earlier.keys() - later.keys()),
                        ("only in the later run", later.keys() - earlier.keys())):
        if only:
            section.notes.append(f"{label}: " + "; ".join(
                ", ".join(format_value(value) for value in case) for case in sorted(only, key=str)))
    return section


def describe_run(label: str, path: Path, run: dict[str, Any]) -> str:
    """One line on where and when a run was made, with how busy the machine was."""
    machine = run.get("machine", {})
    database = machine.get("database", {}).get("vendor", "?")
    redis = "embedded Redis" if machine.get("redis", {}).get("embedded") else "Redis server"
    stolen = [f"{name} {share:.0%}" for name, section in run["benchmarks"].items()
              if _is_number(share := section.get("cpu_stolen_share"))]
    return (f"{label}: {path.name} - {run.get('started_at', '?')}, {run.get('mode', '?')} run, "
            f"commit {str(machine.get('commit', ''))[:10] or '?'}; {machine.get('cpu_model', '?')}, "
            f"{machine.get('cpu_cores', '?')} cores; {database} + {redis}; load average at start "
            f"{' / '.join(map(str, machine.get('load_average', []))) or '?'}"
            + (f"; CPU stolen by the hypervisor: {', '.join(stolen)}" if stolen else ""))


def comparison(before_path: Path, after_path: Path) -> str:
    """The whole report: both runs described, their differences in setup, then one table per benchmark."""
    before, after = load_run(before_path), load_run(after_path)
    lines = [describe_run("earlier", before_path, before), describe_run("later", after_path, after)]
    for what, read in (("machines", lambda run: run.get("machine", {}).get("cpu_model")),
                       ("sizes", lambda run: run.get("mode")),
                       ("databases", lambda run: run.get("machine", {}).get("database", {}).get("vendor"))):
        if read(before) != read(after):
            lines.append(f"  ! different {what}: the figures below are not like for like")
    shared = [name for name in after["benchmarks"] if name in before["benchmarks"]]
    if not shared:
        lines.append("no benchmark is in both runs")
    for name in shared:
        lines += ["", format_section(compare_benchmark(name, before["benchmarks"][name], after["benchmarks"][name]))]
    for label, run, other in (("earlier", before, after), ("later", after, before)):
        alone = [name for name in run["benchmarks"] if name not in other["benchmarks"]]
        if alone:
            lines.append(f"\nonly in the {label} run: {', '.join(alone)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, metavar="RUN",
                        help=f"BEFORE [AFTER] run files (default: the two newest in {RESULTS_DIR})")
    args = parser.parse_args(argv)
    if len(args.runs) > 2:
        parser.error("at most two runs: BEFORE [AFTER]")
    try:
        before, after = (tuple(args.runs) if len(args.runs) == 2
                         else default_runs(RESULTS_DIR, args.runs[0] if args.runs else None))
        print(comparison(before, after))
    except CompareError as exc:
        print(f"bench.compare: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
