"""What a benchmark returns, how it is printed as a table, and how all of them are saved as JSON."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Column:
    key: str
    header: str


@dataclass
class Section:
    """One benchmark's figures: one row per measured case, all keys saved, ``columns`` printed."""

    name: str
    title: str
    columns: list[Column]
    #: The row fields that name a measured case (its sizes, page or step): what bench.compare
    #: matches the rows of two runs by.
    key: tuple[str, ...] = ()
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Figures saved to JSON that are not per-row.
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "key": list(self.key),
                "columns": [[column.key, column.header] for column in self.columns],
                "rows": self.rows, "notes": self.notes, **self.extra}


def format_value(value: Any) -> str:
    """Integers with thousands separators; floats with 3-4 significant digits; None as "-"."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        magnitude = abs(value)
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude >= 100:
            return f"{value:.1f}"
        if magnitude >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


def format_section(section: Section) -> str:
    """The section as a title, an aligned table (numbers right-aligned) and its notes."""
    cells = [[format_value(row.get(column.key)) for column in section.columns] for row in section.rows]
    headers = [column.header for column in section.columns]
    widths = [max([len(header)] + [len(line[position]) for line in cells]) for position, header in enumerate(headers)]
    numeric = [all(isinstance(row.get(column.key), (int, float)) or row.get(column.key) is None
                   for row in section.rows) for column in section.columns]

    def line(values: list[str]) -> str:
        return "  ".join(value.rjust(width) if is_number else value.ljust(width)
                         for value, width, is_number in zip(values, widths, numeric, strict=True)).rstrip()

    out = [section.title, "=" * len(section.title)]
    if section.columns:
        out += [line(headers), line(["-" * width for width in widths]), *(line(values) for values in cells)]
    out += [f"  * {note}" for note in section.notes]
    return "\n".join(out)


def write_results(directory: Path, document: dict[str, Any], started: dt.datetime,
                  prefix: str = "bench") -> tuple[Path, Path]:
    """Write ``<prefix>-<UTC timestamp>.json`` and ``latest.json`` (same content) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=2, sort_keys=False, default=str) + "\n"
    stamped = directory / f"{prefix}-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    stamped.write_text(text, encoding="utf-8")
    latest = directory / "latest.json"
    latest.write_text(text, encoding="utf-8")
    return stamped, latest
