"""Text layouts of sprio, sshare, squeue and sacct (and the print_fields tables sacctmgr shares), plus
the same data as JSON rows.

Public API (pure Python, no Django)::

    # sprio (reference section 3; slurm:src/sprio/sprio.c, print.c)
    sprio_format(config, *, long=False, norm=False, with_user=False) -> str      # e.g. "%.15i %9r %.10Y ..."
    sprio_text(breakdowns, config, *, long=False, norm=False, with_user=False, weights=False,
               header=True, format=None) -> str
    sprio_rows(breakdowns) -> list[dict]                                            # JSON
    sprio_lines(breakdowns, format_text) -> list[str]; sprio_header(format_text) -> str
    SPRIO_NO_JOBS = "Unable to find jobs matching user/id(s) specified"
    # sshare (reference 2.4; slurm:src/sshare/process.c)
    sshare_text(rows, *, fair_tree=True, long=False, partitions=False, user=None, all_users=False,
                parsable=None, header=True) -> str
    sshare_rows(rows, ...) -> list[dict]
    # squeue (reference 5.4)
    SqueueJob(job_id, partition, name, user, state, elapsed_seconds=0, time_limit_minutes=None, nodes=1,
              nodelist="", reason="None", start_time=None, sched_nodes="", priority=0)
    squeue_text(jobs, *, long=False, start=False, header=True, format=None) -> str
    squeue_rows(jobs) -> list[dict]
    squeue_format(*, long, start, format) -> str; squeue_lines(jobs, format_text); squeue_header(format_text)
    squeue_long_format(fields, *, unknown=None) -> str   # -O's fields as an -o format (``%20{accruetime}``
                                                         # for a field without a letter); unknown: error lines
    squeue_reads_more(format_text); squeue_reads_clock(format_text)   # what reports.squeue must read/refresh
    in_squeue_order(items, *, partition=, state=, priority=)   # squeue's default order, by getters
    STATE_CODES   # a job state's short code (squeue's ST, -t's codes, its state order)
    report_text(header, lines) -> str   # header (None: -h) and lines as the command prints them
    LineCache().lines(report, rows, lay_out, keys=None)   # lines kept between reads of a report
    # sacct (reference 6.2)
    SacctJob(job_id, name, partition, account, alloc_cpus, state, exit_code="0:0", user="", elapsed_seconds=0, ...)
    sacct_text(jobs, *, fields=None, parsable=None, header=True) -> str
    sacct_rows(jobs, *, fields=None) -> list[dict]
    # print_fields (slurm:src/common/print_fields.c), used by sshare, sacct and sacctmgr
    PrintField(name, width, kind)       # kind: str, uint, double, time (minutes), time_secs, tres; width < 0 = left
    format_width(item, width) -> int    # the width of a ``name%width`` format item; 0 = the field's own
    print_fields(fields, rows, *, parsable=None, header=True) -> str   # parsable: None, "ending" (-p), "plain" (-P)

Two printing engines, as in Slurm:
- sprio and squeue (``_print_str``): ``%[.][size]type`` -- in the code ``.`` means RIGHT-justify (the
  man pages say left; reference 9.1), values are cut to the width without a marker, every field is
  followed by its literal suffix (one space).
- print_fields (sshare, sacct, sacctmgr): header ``%*.*s``, a dashed line, strings longer than the
  width end in ``+``, doubles ``%f`` (``inf`` for no usage; Slurm's NO_VAL/INFINITE print blank), uint
  blank when unset; parsable output joins with ``|`` (``-p`` ends each line with one, ``-P`` does not).
sprio cells: weighted factors ``%.0f`` (rounded), PRIORITY the truncated client-side sum (so the
columns need not add up), ``-n`` normalised ``%.7f`` and PRIORITY/4294967295 as ``%16.14f``, TRES
``name=%.0f`` (``-n``: ``%.2f``) of the non-zero terms; ``-w`` prints one "Weights" row.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from operator import attrgetter
from typing import Any

from trainhub.slurm import arrays, jobenv
from trainhub.slurm.conf import SlurmConfig
from trainhub.slurm.fairshare import NO_VAL, ShareRow
from trainhub.slurm.hostlist import expand as expand_hosts
from trainhub.slurm.preemption import victim_end
from trainhub.slurm.priority import FACTOR_NAMES, PRIORITY_MAX, PriorityBreakdown
from trainhub.slurm.steps import default_distribution
from trainhub.slurm.timefmt import format_elapsed, format_secs, format_time_limit

__all__ = [
    "SPRIO_NO_JOBS",
    "SPRIO_ORDER",
    "PrintField",
    "SacctJob",
    "LineCache",
    "SqueueJob",
    "print_fields",
    "sacct_rows",
    "sacct_text",
    "sprio_format",
    "report_text",
    "sprio_header",
    "sprio_lines",
    "sprio_rows",
    "sprio_text",
    "in_squeue_order",
    "STATE_CODES",
    "squeue_format",
    "squeue_header",
    "squeue_lines",
    "squeue_rows",
    "squeue_text",
    "sshare_rows",
    "sshare_text",
]

SPRIO_NO_JOBS = "Unable to find jobs matching user/id(s) specified"
#: ``%[.][size]letter``, or ``%[.][size]{name}``: an -O field with no -o letter (squeue_long_format).
_FORMAT_TOKEN = re.compile(r"%(\.?)(\d*)([A-Za-z]|\{[a-z0-9_-]+\})")


# --- the sprio/squeue engine --------------------------------------------------------------------

class _Uncut(str):
    """A value ``_print_str`` prints whole, past its width (squeue's ``_print_secs`` passes
    cut_output false: a 365-day TIME_LIMIT prints ``365-00:00:00`` in -l's 9-wide column,
    fixtures/22.05/backfill-nolimit/squeue-l.txt); it is still padded to the width."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec.split(".", 1)[0])


def _uncut_time(text: str) -> str:
    """A squeue duration (secs2time_str) is printed whole; UNLIMITED and the like are cut as any word."""
    return _Uncut(text) if text[:1].isdigit() else text


def _cell(text: str, width: int, right: bool) -> str:
    """``_print_str`` with cut_output: right-justified or left, then cut/padded to ``width``."""
    if not width:
        return text
    return format(text, f">{width}" if right else f"<{width}")[:width]


@dataclass(frozen=True)
class _Token:
    letter: str
    width: int
    right: bool
    suffix: str


def _parse_format(text: str) -> tuple[str, list[_Token]]:
    """A Slurm format string -> leading text and its fields (each with the text up to the next field)."""
    matches = list(_FORMAT_TOKEN.finditer(text))
    prefix = text[:matches[0].start()] if matches else text
    tokens = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        tokens.append(_Token(match.group(3), int(match.group(2) or 0), bool(match.group(1)), text[match.end():end]))
    return prefix, tokens


def _template(format_text: str) -> tuple[str, list[_Token]]:
    """A Slurm format string as a ``str.format`` template and its fields. ``{:>W.W}`` is ``_print_str``'s
    right-justify-then-cut (``{:<W.W}`` the left one) in one step."""
    prefix, tokens = _parse_format(format_text)

    def escaped(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}")

    fields = [f"{{{index}:{'>' if t.right else '<'}{t.width}.{t.width}}}" if t.width else f"{{{index}}}"
              for index, t in enumerate(tokens)]
    return escaped(prefix) + "".join(field_ + escaped(t.suffix) for field_, t in zip(fields, tokens, strict=True)), tokens


def _header(format_text: str, headers: Mapping[str, str]) -> str:
    template, tokens = _template(format_text)
    return template.format(*(headers.get(t.letter, "") for t in tokens))


def _lines(format_text: str, getter_for: Callable[[str], Callable[[Any], str]], items: Sequence[Any]) -> list[str]:
    """One line per item laid out with a Slurm format string; ``getter_for(letter)`` gives each field's text."""
    template, tokens = _template(format_text)
    if not tokens:
        return [template.format()] * len(items)
    # Column by column, then line by line: map() keeps the per-cell loop in C (10,000-line sprio).
    columns = [list(map(getter_for(t.letter), items)) for t in tokens]
    return list(map(template.format, *columns))


def _joined(header: str | None, lines: Sequence[str]) -> str:
    """Lines as a command prints them: the header (when printed) first, each line ending in a newline."""
    every = [header, *lines] if header is not None else lines
    return "\n".join(every) + ("\n" if every else "")


def _render(format_text: str, headers: Mapping[str, str], getter_for: Callable[[str], Callable[[Any], str]],
            items: Sequence[Any], header: bool) -> str:
    """Lay out ``items`` with a Slurm format string, under its header when ``header``."""
    return _joined(_header(format_text, headers) if header else None, _lines(format_text, getter_for, items))


class LineCache:
    """The lines of each report as last laid out, by the row each was laid out from, so that the next
    read of the same report lays out only the rows that changed since.

    Slurm's sprio and squeue print what slurmctld computed at its last pass; between passes a queue of
    10,000 pending jobs is read again unchanged, and laying its lines out again costs more than
    reading it (issue 21). A row must hold everything its line shows (a database row of plain values:
    the same row always gives the same line); ``report`` names the layout (cluster, format, weights).
    Only the rows of a report's last read are kept, for the last ``reports`` reports read, so what is
    kept is bounded by the queues' length; safe to share between threads.
    """

    def __init__(self, reports: int = 16):
        self._by_report: OrderedDict[Hashable, dict[Hashable, str]] = OrderedDict()
        self._reports = reports
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._by_report.clear()

    def lines(self, report: Hashable, rows: Sequence[Any], lay_out: Callable[[list[Any]], list[str]],
              keys: Sequence[Hashable] | None = None) -> list[str]:
        """The line of each row, in order: kept ones reused, the others from ``lay_out(rows)``.
        ``keys`` (default: the rows themselves) stand for the rows where a row alone does not
        determine its line (squeue's TIME of a running job moves with the clock)."""
        keys = rows if keys is None else keys
        with self._lock:
            known = self._by_report.get(report, {})
        lines = list(map(known.get, keys))
        missing = [row for row, line in zip(rows, lines, strict=True) if line is None]
        if missing:
            fresh = iter(lay_out(missing))
            lines = [next(fresh) if line is None else line for line in lines]
        if missing or len(known) != len(keys):
            known = dict(zip(keys, lines, strict=True))
        with self._lock:
            self._by_report[report] = known
            self._by_report.move_to_end(report)
            while len(self._by_report) > self._reports:
                self._by_report.popitem(last=False)
        return lines


class ReportCache:
    """The text of each report as last built, with the rows it was built from, under a fingerprint of
    those rows that is cheaper to read than the rows: a report read again whose fingerprint has not
    changed is that text, without reading its rows or looking up a line of them (issue 21).

    sprio's fingerprint is each job's id and when its priority was computed (slurmctld's last
    calculation: the pass writes a job's factors with that moment, and every other change of
    them clears it). Only the last build of each of the last ``reports`` reports is kept; safe to
    share between threads.
    """

    def __init__(self, reports: int = 8):
        self._by_report: OrderedDict[Hashable, tuple[Any, str, Sequence[Any]]] = OrderedDict()
        self._reports = reports
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._by_report.clear()

    def get(self, report: Hashable, fingerprint: Any) -> tuple[str, Sequence[Any]] | None:
        """The (text, rows) kept for ``report`` if they were built under ``fingerprint``, else None."""
        with self._lock:
            kept = self._by_report.get(report)
        if kept is None or kept[0] != fingerprint:
            return None
        return kept[1], kept[2]

    def put(self, report: Hashable, fingerprint: Any, text: str, rows: Sequence[Any]) -> None:
        with self._lock:
            self._by_report[report] = (fingerprint, text, rows)
            self._by_report.move_to_end(report)
            while len(self._by_report) > self._reports:
                self._by_report.popitem(last=False)


# --- sprio --------------------------------------------------------------------------------------

_SPRIO_HEADERS = {"i": "JOBID", "r": "PARTITION", "u": "USER", "o": "ACCOUNT", "Y": "PRIORITY", "y": "PRIORITY",
                  "S": "SITE", "A": "AGE", "a": "AGE", "B": "ASSOC", "b": "ASSOC", "F": "FAIRSHARE",
                  "f": "FAIRSHARE", "J": "JOBSIZE", "j": "JOBSIZE", "P": "PARTITION", "p": "PARTITION",
                  "n": "QOSNAME", "Q": "QOS", "q": "QOS", "N": "NICE", "T": "TRES", "t": "TRES", "c": "CLUSTER"}
#: factor column letters (weighted upper case, normalised lower case) -> breakdown factor name
_SPRIO_FACTORS = {"A": "age", "B": "assoc", "F": "fairshare", "J": "jobsize", "P": "partition", "Q": "qos"}
_WEIGHT_ATTRIBUTES = {"age": "priority_weight_age", "assoc": "priority_weight_assoc",
                      "fairshare": "priority_weight_fairshare", "jobsize": "priority_weight_job_size",
                      "partition": "priority_weight_partition", "qos": "priority_weight_qos"}


#: sprio's default sort: by job id, then partition (a job pending in several partitions has a line for each).
SPRIO_ORDER = attrgetter("job_id", "partition")


def sprio_format(config: SlurmConfig, *, long: bool = False, norm: bool = False, with_user: bool = False) -> str:
    """sprio's default format, built as sprio.c does: factor columns only for non-zero weights; -l as
    22.05 prints it, without ACCOUNT and QOSNAME (fixtures/22.05/scenario/sprio-l-running.txt)."""
    if long:
        if norm:
            return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
        return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
    parts = ["%.15i", "%9r"] + (["%.8u"] if with_user else [])
    parts += ["%10y"] if norm else ["%.10Y", "%.10S"]
    for letter, factor in _SPRIO_FACTORS.items():
        if getattr(config, _WEIGHT_ATTRIBUTES[factor]):
            parts.append(f"%10{letter.lower()}" if norm else f"%.10{letter}")
    if config.priority_weight_tres:
        parts.append("%20t" if norm else "%.20T")
    return " ".join(parts)


def _tres_cell(breakdown: PriorityBreakdown, normalised: bool) -> str:
    """The non-zero weighted TRES terms (the breakdown keeps them in Slurm's TRES order)."""
    if normalised:
        return ",".join(f"{name}={f.factor:.2f}" for name, f in breakdown.tres.items() if f.weighted)
    return ",".join(f"{name}={f.weighted:.0f}" for name, f in breakdown.tres.items() if f.weighted)


def _weighted_getter(factor: str) -> Callable[[PriorityBreakdown], str]:
    index = FACTOR_NAMES.index(factor)
    return lambda item: f"{item.values[index] * item.weights[index]:.0f}"


def _normalised_getter(factor: str) -> Callable[[PriorityBreakdown], str]:
    index = FACTOR_NAMES.index(factor)
    return lambda item: f"{item.values[index]:.7f}"


_SPRIO_GETTERS: dict[str, Callable[[PriorityBreakdown], str]] = {
    "i": lambda item: str(item.job_id), "r": attrgetter("partition"), "u": attrgetter("user"),
    "o": attrgetter("account"), "n": lambda item: item.qos or "", "Y": lambda item: str(item.sprio_priority),
    "y": lambda item: f"{item.sprio_priority / PRIORITY_MAX:16.14f}",
    "S": lambda item: "0" if item.admin_set else str(item.site), "N": lambda item: str(item.nice),
    "T": lambda item: "" if item.admin_set else _tres_cell(item, False),
    "t": lambda item: "" if item.admin_set else _tres_cell(item, True),
    **{letter: _weighted_getter(factor) for letter, factor in _SPRIO_FACTORS.items()},
    **{letter.lower(): _normalised_getter(factor) for letter, factor in _SPRIO_FACTORS.items()},
}


def _sprio_getter(letter: str) -> Callable[[PriorityBreakdown], str]:
    return _SPRIO_GETTERS.get(letter, lambda item: "")


def _weights_cell(config: SlurmConfig, letter: str) -> str:
    if letter == "i":
        return "Weights"
    if letter == "S":
        return "1"
    if letter in ("T", "t"):
        return config.explicit.get("PriorityWeightTRES", "")
    factor = _SPRIO_FACTORS.get(letter.upper())
    return str(getattr(config, _WEIGHT_ATTRIBUTES[factor])) if factor else ""


def sprio_text(breakdowns: Iterable[PriorityBreakdown], config: SlurmConfig, *, long: bool = False,
               norm: bool = False, with_user: bool = False, weights: bool = False, header: bool = True,
               format: str | None = None) -> str:
    """sprio's output for the given rows (already filtered: pending, eligible, not held); rows are
    printed by ascending job id, sprio's default sort. ``weights`` prints ``sprio -w`` instead."""
    format_text = format or sprio_format(config, long=long, norm=norm, with_user=with_user)
    if weights:
        return _render(format_text, _SPRIO_HEADERS, lambda letter: lambda _item: _weights_cell(config, letter),
                       [None], header)
    rows = sorted(breakdowns, key=SPRIO_ORDER)
    return _render(format_text, _SPRIO_HEADERS, _sprio_getter, rows, header)


def sprio_lines(breakdowns: Sequence[PriorityBreakdown], format_text: str) -> list[str]:
    """sprio's line of each breakdown (format_text: sprio_format's), in the order given."""
    return _lines(format_text, _sprio_getter, breakdowns)


def sprio_header(format_text: str) -> str:
    return _header(format_text, _SPRIO_HEADERS)


def report_text(header: str | None, lines: Sequence[str]) -> str:
    """A sprio or squeue output from its header (None: -h) and lines."""
    return _joined(header, lines)


def sprio_rows(breakdowns: Iterable[PriorityBreakdown]) -> list[dict[str, Any]]:
    """The sprio data as JSON rows (unrounded values; ``priority`` is sprio's PRIORITY)."""
    rows = []
    for item in sorted(breakdowns, key=SPRIO_ORDER):
        rows.append({
            "jobId": item.job_id, "partition": item.partition, "user": item.user, "account": item.account,
            "qos": item.qos, "priority": item.sprio_priority, "jobPriority": item.priority, "site": item.site,
            "nice": item.nice, "adminSet": item.admin_set,
            "factors": {name: {"factor": f.factor, "weight": f.weight, "weighted": f.weighted}
                        for name, f in item.factors.items()},
            "tres": {name: {"factor": f.factor, "weight": f.weight, "weighted": f.weighted}
                     for name, f in item.tres.items()},
        })
    return rows


# --- print_fields -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PrintField:
    """One print_fields column: ``width`` < 0 left-justifies; ``kind`` picks the print routine."""

    name: str
    width: int
    kind: str = "str"

    def with_width(self, width: int) -> PrintField:
        return PrintField(self.name, width, self.kind)


_UNSET_NUMBERS = (float(NO_VAL), 4_294_967_295.0, float(2**64 - 2), float(2**64 - 1))


def _double_text(value: float, width: int) -> str:
    text = f"{value:{width}f}"
    if len(text) <= width:
        return text
    precision = width
    text = f"{value:{width}.{precision}e}"
    if len(text) > width:
        precision -= len(text) - width
        text = f"{value:{width}.{max(precision, 0)}e}"
    return text


def _field_text(field_: PrintField, value: Any, parsable: bool) -> str | None:
    """The value as print_fields prints it; None for an unset value (blank)."""
    if value is None:
        return None
    kind = field_.kind
    if kind == "double":
        number = float(value)
        if number in _UNSET_NUMBERS:
            return None
        return f"{number:f}" if parsable else _double_text(number, abs(field_.width))
    if kind == "uint":
        return str(int(value))
    if kind == "time":  # minutes, mins2time_str
        return format_secs(int(value) * 60)
    if kind == "time_secs":
        return format_secs(int(value))
    return str(value)


def print_fields(fields: Sequence[PrintField], rows: Iterable[Sequence[Any]], *, parsable: str | None = None,
                 header: bool = True) -> str:
    """A print_fields table; ``rows`` hold one value per field. ``parsable``: "ending" = ``-p``
    (every field followed by ``|``), "plain" = ``-P`` (no ``|`` after the last field)."""
    out: list[str] = []

    def join(cells: list[str]) -> str:
        if parsable == "ending":
            return "".join(f"{cell}|" for cell in cells)
        if parsable == "plain":
            return "|".join(cells)
        return "".join(f"{cell} " for cell in cells)

    if header:
        if parsable:
            out.append(join([f.name for f in fields]))
        else:
            out.append(join([(f.name.rjust(abs(f.width)) if f.width > 0 else f.name.ljust(abs(f.width)))[:abs(f.width)]
                             for f in fields]))
            out.append(join(["-" * abs(f.width) for f in fields]))
    for row in rows:
        cells = []
        for field_, value in zip(fields, row, strict=True):
            text = _field_text(field_, value, bool(parsable))
            if parsable:
                cells.append(text or "")
                continue
            width = abs(field_.width)
            if text is None:
                text = ""
            elif field_.kind in ("str", "tres") and len(text) > width:
                text = text[:width - 1] + "+"
            cells.append(text.rjust(width) if field_.width > 0 else text.ljust(width))
        out.append(join(cells))
    return "\n".join(out) + ("\n" if out else "")


# --- sshare -------------------------------------------------------------------------------------

_SSHARE_FIELDS = {
    "Account": PrintField("Account", -20), "User": PrintField("User", 10), "Partition": PrintField("Partition", 12),
    "RawShares": PrintField("RawShares", 10), "NormShares": PrintField("NormShares", 11, "double"),
    "RawUsage": PrintField("RawUsage", 11, "uint"), "NormUsage": PrintField("NormUsage", 11, "double"),
    "EffectvUsage": PrintField("EffectvUsage", 13, "double"), "FairShare": PrintField("FairShare", 10, "double"),
    "LevelFS": PrintField("LevelFS", 10, "double"), "GrpTRESMins": PrintField("GrpTRESMins", 30, "tres"),
    "TRESRunMins": PrintField("TRESRunMins", 30, "tres"),
}


def _sshare_columns(*, fair_tree: bool, long: bool, partitions: bool) -> list[str]:
    names = ["Account", "User"] + (["Partition"] if partitions else []) + ["RawShares", "NormShares", "RawUsage"]
    if long:
        names += ["NormUsage", "EffectvUsage", "FairShare"] + (["LevelFS"] if fair_tree else [])
        return names + ["GrpTRESMins", "TRESRunMins"]
    return names + ["EffectvUsage", "FairShare"]


def _sshare_values(row: ShareRow, tres_run_minutes: Mapping[str, str], grp_tres_mins: Mapping[str, str],
                   ) -> dict[str, Any]:
    raw_shares = None if row.is_root else ("parent" if row.raw_shares is None else row.raw_shares)
    # sshare prints root's NormShares as 0 and its NormUsage blank (fixtures/22.05/scenario/sshare-*.txt)
    return {"Account": " " * row.depth + row.account,
            "User": row.user, "Partition": row.partition, "RawShares": raw_shares,
            "NormShares": 0.0 if row.is_root else row.norm_shares, "RawUsage": int(row.raw_usage),
            "NormUsage": None if row.is_root else row.norm_usage, "EffectvUsage": row.effective_usage,
            "FairShare": row.fairshare, "LevelFS": row.level_fs, "GrpTRESMins": grp_tres_mins.get(row.key, ""),
            "TRESRunMins": tres_run_minutes.get(row.key, "")}


def _sshare_selected(rows: Iterable[ShareRow], user: str | None, all_users: bool) -> list[ShareRow]:
    """Without -a, sshare shows every account but only the requesting user's user rows."""
    return [row for row in rows if row.user is None or all_users or row.user == user]


def sshare_text(rows: Iterable[ShareRow], *, fair_tree: bool = True, long: bool = False, partitions: bool = False,
                user: str | None = None, all_users: bool = False, parsable: str | None = None,
                header: bool = True, tres_run_minutes: Mapping[str, str] | None = None,
                grp_tres_mins: Mapping[str, str] | None = None) -> str:
    """``tres_run_minutes``: TRESRunMins text per row key (reports._tres_run_minutes);
    ``grp_tres_mins``: the GrpTRESMins limit set on a row's association, as TRES text."""
    names = _sshare_columns(fair_tree=fair_tree, long=long, partitions=partitions)
    fields = [_SSHARE_FIELDS[name] for name in names]
    values = [_sshare_values(row, tres_run_minutes or {}, grp_tres_mins or {})
              for row in _sshare_selected(rows, user, all_users)]
    return print_fields(fields, ([value[name] for name in names] for value in values), parsable=parsable,
                        header=header)


def sshare_rows(rows: Iterable[ShareRow], *, user: str | None = None, all_users: bool = True) -> list[dict[str, Any]]:
    return [{"account": row.account, "user": row.user, "partition": row.partition, "depth": row.depth,
             "rawShares": "parent" if row.raw_shares is None and not row.is_root else row.raw_shares,
             "normShares": row.norm_shares, "rawUsage": row.raw_usage, "normUsage": row.norm_usage,
             "effectiveUsage": row.effective_usage, "fairShare": row.fairshare,
             "levelFs": None if row.level_fs is None or math.isinf(row.level_fs) else row.level_fs,
             "levelFsInfinite": row.level_fs is not None and math.isinf(row.level_fs)}
            for row in _sshare_selected(rows, user, all_users)]


# --- squeue -------------------------------------------------------------------------------------

STATE_CODES = {"PENDING": "PD", "RUNNING": "R", "COMPLETING": "CG", "COMPLETED": "CD", "CANCELLED": "CA",
                "FAILED": "F", "TIMEOUT": "TO", "PREEMPTED": "PR", "NODE_FAIL": "NF", "REQUEUED": "RQ",
                "SUSPENDED": "S", "BOOT_FAIL": "BF", "OUT_OF_MEMORY": "OOM", "DEADLINE": "DL",
                "CONFIGURING": "CF", "REQUEUE_HOLD": "RH", "RESIZING": "RS", "REVOKED": "RV"}


@dataclass(slots=True)
class SqueueJob:
    """One line of squeue (a value: treat it as read-only). Not frozen: a frozen dataclass sets each
    of its fields through object.__setattr__, which made building 10,000 of them cost more than
    reading their rows."""

    #: A step's ``JOBID.N`` or ``JOBID.batch`` in squeue -s.
    job_id: int | str
    partition: str
    name: str
    user: str
    state: str
    elapsed_seconds: int = 0
    time_limit_minutes: int | None = None
    nodes: int = 1
    nodelist: str = ""
    reason: str = "None"
    start_time: dt.datetime | None = None
    sched_nodes: str = ""
    priority: int = 0
    account: str = ""
    cpus: int = 1
    #: TRES_PER_JOB, TRES_PER_NODE (%b) and TRES_PER_TASK: the job's GPU request as scontrol shows it
    #: (scontrol_job.gpu_tres_per; "": N/A).
    tres_per_job: str = ""
    tres_per_node: str = ""
    tres_per_task: str = ""
    nice: int = 0
    #: Job arrays (trainhub.slurm.arrays): the array's job id, the task this record runs (None while
    #: it stands for the pending ``array_pending``) and the ``%`` limit.
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_pending: str = ""
    array_max_running: int = 0
    #: -C/--constraint as stored (None: not given, squeue's ``(null)``).
    features: str | None = None
    qos: str = ""
    cpus_per_task: int = 1
    comment: str = ""
    #: scontrol's Dependency= text ("" once satisfied or never given).
    dependency: str = ""
    exclusive: bool = False
    #: --mem (MB per node) or --mem-per-cpu (MB per CPU); 0: not given.
    mem_per_node: int = 0
    mem_per_cpu: int = 0
    req_nodes: str = ""
    exc_nodes: str = ""
    #: A running preemption victim's GraceTime end (SlurmJob.preempt_kill_time): %e's end if earlier.
    kill_time: dt.datetime | None = None
    #: A finished job's end (None while it is queued).
    end_time: dt.datetime | None = None
    submit_time: dt.datetime | None = None
    work_dir: str = ""
    #: The cluster's name; the submitter's uid, gid and group name (SlurmJob.uid, gid, group_name).
    cluster: str = ""
    uid: int = 0
    gid: int = 0
    group: str = ""
    #: %o: scontrol_job.command_text's.
    command: str = "(null)"
    #: scontrol's BatchFlag (False: salloc's allocation) and the node salloc ran on, if known.
    batch: bool = True
    alloc_node: str = ""
    alloc_sid: int = 0
    #: None: N/A (not accruing; not eligible while held or waiting for a dependency).
    accrue_time: dt.datetime | None = None
    eligible_time: dt.datetime | None = None
    num_tasks: int = 1
    requeue: bool = True
    restart_count: int = 0
    #: The wait status slurmctld keeps (exit code << 8 | signal), 0 while the job runs.
    exit_status: int = 0
    #: PendingTime: start - submit once started, else now - submit (seconds).
    pending_seconds: int = 0
    stdout_pattern: str = "slurm-%j.out"
    stderr_pattern: str = ""
    #: AssocID (0: not read) and when the cluster's scheduler last ran (LastSchedEval; None: not read).
    assoc_id: int = 0
    last_pass: dt.datetime | None = None
    #: tres-alloc: scontrol show job's TRES= (scontrol_job.job_tres_text; "": not read).
    tres: str = ""

    @property
    def display_id(self) -> str:
        return arrays.display_id(job_id=self.job_id, array_job_id=self.array_job_id, pending=self.array_pending,
                                 task_id=self.array_task_id, max_running=self.array_max_running)

    def one_per_task(self) -> list[SqueueJob]:
        """squeue -r: an array's pending record once per pending task."""
        if self.array_task_id is not None or not self.array_pending:
            return [self]
        return [replace(self, array_task_id=task, array_pending="") for task in arrays.expand(self.array_pending)]


SQUEUE_DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_LONG = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
SQUEUE_START = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
_SQUEUE_HEADERS = {"i": "JOBID", "P": "PARTITION", "j": "NAME", "u": "USER", "t": "ST", "T": "STATE", "M": "TIME",
                   "l": "TIME_LIMIT", "D": "NODES", "R": "NODELIST(REASON)", "S": "START_TIME", "Y": "SCHEDNODES",
                   "Q": "PRIORITY", "r": "REASON", "N": "NODELIST", "a": "ACCOUNT", "C": "CPUS",
                   "b": "TRES_PER_NODE", "y": "NICE", "F": "ARRAY_JOB_ID", "K": "ARRAY_TASK_ID", "A": "JOBID",
                   "f": "FEATURES", "q": "QOS", "c": "MIN_CPUS", "d": "MIN_TMP_DISK", "e": "END_TIME",
                   "E": "DEPENDENCY", "h": "OVER_SUBSCRIBE", "H": "SOCKETS_PER_NODE", "I": "CORES_PER_SOCKET",
                   "J": "THREADS_PER_CORE", "k": "COMMENT", "L": "TIME_LEFT", "m": "MIN_MEMORY", "n": "REQ_NODES",
                   "O": "CONTIGUOUS", "p": "PRIORITY", "v": "RESERVATION", "V": "SUBMIT_TIME", "w": "WCKEY",
                   "W": "LICENSES", "x": "EXC_NODES", "X": "CORE_SPEC", "z": "S:C:T", "Z": "WORK_DIR",
                   "B": "EXEC_HOST", "g": "GROUP", "G": "GROUP", "o": "COMMAND", "U": "UID"}
#: squeue -O field names (case-insensitive) -> their -o letter.
_SQUEUE_FIELD_NAMES = {"jobid": "A", "jobarrayid": "i", "partition": "P", "name": "j", "username": "u", "statecompact": "t",
                       "state": "T", "timeused": "M", "timelimit": "l", "numnodes": "D", "reasonlist": "R",
                       "starttime": "S", "schednodes": "Y", "priority": "p", "prioritylong": "Q", "reason": "r", "nodelist": "N",
                       "account": "a", "numcpus": "C", "tres-per-node": "b", "nice": "y", "arrayjobid": "F",
                       "arraytaskid": "K", "feature": "f", "qos": "q", "mincpus": "c", "mintmpdisk": "d",
                       "endtime": "e", "dependency": "E", "oversubscribe": "h", "sockets": "H", "cores": "I",
                       "threads": "J", "comment": "k", "timeleft": "L", "minmemory": "m", "reqnodes": "n",
                       "contiguous": "O", "reservation": "v", "submittime": "V", "wckey": "w", "licenses": "W",
                       "corespec": "X", "sct": "z", "workdir": "Z", "batchhost": "B", "groupname": "g",
                       "groupid": "G", "command": "o", "userid": "U"}
_O_FIELD = re.compile(r"([A-Za-z0-9_-]+)(?::(\.?)(\d*))?")


class SqueueFormatError(ValueError):
    """An -O field squeue does not know."""


def squeue_long_format(fields: str, *, unknown: list[str] | None = None) -> str:
    """``squeue -O JobID,Account:10,...`` as an -o format: each field 20 wide (or ``:[.]size``), left
    justified (``.`` right), no separator (fixtures/22.05/scenario/squeue-O-running.txt). A field squeue
    does not know raises SqueueFormatError, or with ``unknown`` is left out and its error line
    appended there, as squeue prints it and goes on (fixtures/22.05/squeue-letters/fields.txt, CPUFreq)."""
    parts = []
    for item in (part.strip() for part in fields.split(",") if part.strip()):
        match = _O_FIELD.fullmatch(item)
        name = match.group(1).lower() if match else ""
        letter = _SQUEUE_FIELD_NAMES.get(name) or (f"{{{name}}}" if name in _SQUEUE_NAMED_FIELDS else None)
        if letter is None:
            message = f"Invalid job format specification: {match.group(1) if match else item}"
            if unknown is None:
                raise SqueueFormatError(message)
            unknown.append(f"squeue: error: {message}")
            continue
        parts.append(f"%{match.group(2) or ''}{match.group(3) or 20}{letter}")
    return "".join(parts)


_SQUEUE_GETTERS: dict[str, Callable[[SqueueJob], str]] = {
    "i": attrgetter("display_id"), "P": attrgetter("partition"), "j": attrgetter("name"),
    "A": lambda job: str(job.job_id), "F": lambda job: str(job.array_job_id or job.job_id),
    "K": lambda job: "N/A" if job.array_job_id is None else arrays.task_text(
        pending=job.array_pending, task_id=job.array_task_id, max_running=job.array_max_running),
    "u": attrgetter("user"), "t": lambda job: STATE_CODES.get(job.state, job.state[:2]), "T": attrgetter("state"),
    "M": lambda job: _uncut_time(format_elapsed(job.elapsed_seconds)),
    "l": lambda job: _uncut_time(format_time_limit(job.time_limit_minutes)), "D": lambda job: str(job.nodes),
    "S": lambda job: job.start_time.strftime("%Y-%m-%dT%H:%M:%S") if job.start_time else "N/A",
    "Y": lambda job: job.sched_nodes or "(null)", "Q": lambda job: str(job.priority), "r": attrgetter("reason"),
    "N": attrgetter("nodelist"), "a": attrgetter("account"), "C": lambda job: str(job.cpus),
    "b": lambda job: job.tres_per_node or "N/A", "y": lambda job: str(job.nice),
    "f": lambda job: "(null)" if job.features is None else job.features,
}


def _timestamp_cell(moment: dt.datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S") if moment else "N/A"


def limit_end(start: dt.datetime, limit_minutes: int, kill_time: dt.datetime | None) -> dt.datetime:
    """A job's end as slurmctld keeps it: start + time limit, or a preemption victim's GraceTime end
    (``kill_time``) if that comes first (fixtures/22.05/preempt-grace: v1 EndTime=21:11:12, not 21:19:48)."""
    return victim_end(start + dt.timedelta(minutes=limit_minutes), kill_time)


#: The states whose %R is the reason, not the nodes (src/squeue/print.c ``_print_job_reason_list``).
_REASON_SHOWN = frozenset({"PENDING", "FAILED", "TIMEOUT"})


def _reason_or_nodes(job: SqueueJob) -> str:
    """%R: ``(REASON)`` for a pending, failed or timed-out job, else its nodes (a cancelled or completed
    job's, none if it never ran: fixtures/22.05/finished-jobs/squeue-all.txt)."""
    return f"({job.reason})" if job.state in _REASON_SHOWN else job.nodelist


def _end_time(job: SqueueJob) -> str:
    """%e: a finished job's end (fixtures/22.05/finished-jobs/squeue-all-o.txt), else start + time limit
    (limit_end); ``NONE`` without a limit, ``N/A`` for a pending job with no expected start
    (fixtures/22.05/squeue-letters: running, BeginTime and waiting jobs)."""
    if job.end_time is not None:
        return _timestamp_cell(job.end_time)
    if job.start_time is None:
        return "N/A"
    if job.time_limit_minutes is None:
        return "NONE"
    return _timestamp_cell(limit_end(job.start_time, job.time_limit_minutes, job.kill_time))


def _time_left(job: SqueueJob) -> str:
    """%L: what is left of the time limit (all of it while pending)."""
    if job.time_limit_minutes is None:
        return "UNLIMITED"
    return format_elapsed(max(0, job.time_limit_minutes * 60 - job.elapsed_seconds))


def _memory(job: SqueueJob) -> str:
    """%m: --mem or --mem-per-cpu in squeue's units (``100M``, ``2G``), ``0`` when not given."""
    megabytes = job.mem_per_node or job.mem_per_cpu
    if not megabytes:
        return "0"
    return f"{megabytes // 1024}G" if megabytes % 1024 == 0 else f"{megabytes}M"


#: Letters with one value for every job trainhub runs: no sockets/cores/threads requests, no
#: reservations, WCKeys, licenses, core specialisation or contiguous nodes, no --tmp.
_SQUEUE_CONSTANTS = {"d": "0", "H": "*", "I": "*", "J": "*", "O": "0", "v": "(null)", "w": "(null)", "W": "(null)",
                     "X": "N/A", "z": "*:*:*"}
_SQUEUE_GETTERS.update({
    "R": _reason_or_nodes,
    "q": attrgetter("qos"), "c": lambda job: str(job.cpus_per_task), "e": _end_time,
    "E": lambda job: job.dependency or "(null)", "h": lambda job: "NO" if job.exclusive else "OK",
    "k": lambda job: job.comment or "(null)", "L": _time_left, "m": _memory, "n": attrgetter("req_nodes"),
    "p": lambda job: f"{job.priority / 2 ** 32:.14f}", "V": lambda job: _timestamp_cell(job.submit_time),
    "x": attrgetter("exc_nodes"), "Z": attrgetter("work_dir"),
    **{letter: (lambda job, value=value: value) for letter, value in _SQUEUE_CONSTANTS.items()},
})


def _batch_host(job: SqueueJob) -> str:
    """%B: the node running the batch script (the allocation's first), or for salloc's allocation the
    node salloc runs on; ``n/a`` while there is none (slurm:src/squeue/print.c _print_job_batch_host)."""
    if not job.batch:
        return job.alloc_node or "n/a"
    if job.state == "PENDING" or not job.nodelist:
        return "n/a"
    return expand_hosts(job.nodelist)[0]


def _last_sched_eval(job: SqueueJob) -> str:
    """LastSchedEval: a job that runs was last looked at when it started; a pending one that is eligible
    at every scheduler pass since, one that is not (held, a dependency, --begin to come) at its
    submission only."""
    if job.state != "PENDING":
        return _timestamp_cell(job.start_time)
    last = job.last_pass
    eligible = job.eligible_time is not None and last is not None and job.eligible_time <= last
    return _timestamp_cell(last if eligible and job.submit_time is not None and last >= job.submit_time
                           else job.submit_time)


def _streams(job: SqueueJob) -> tuple[str, str, str]:
    """STDIN, STDOUT and STDERR: a batch job's files; salloc's allocation has no stdin (``(null)``) or
    stderr (``N/A``), and its STDOUT is squeue's default for a job without one, slurm-JOBID.out."""
    if not job.batch:
        return "(null)", f"{job.work_dir}/slurm-{job.job_id}.out", "N/A"
    return jobenv.standard_streams(stdout_pattern=job.stdout_pattern, stderr_pattern=job.stderr_pattern,
                                   work_dir=job.work_dir, job_id=int(job.job_id), job_name=job.name,
                                   user=job.user, array_job_id=job.array_job_id, task_id=job.array_task_id)


_SQUEUE_GETTERS.update({
    "B": _batch_host, "g": lambda job: job.group or str(job.gid), "G": lambda job: str(job.gid),
    "U": lambda job: str(job.uid),
    "o": attrgetter("command"),
})

#: -O fields that have no -o letter: name (lower case) -> (header, value). Constants are what 22.05
#: prints for every job trainhub runs: no burst buffers, containers, heterogeneous or federated jobs,
#: MCS labels, boards/sockets/cores requests, deadlines, --tres-bind/--tres-freq, reboots or switches
#: (fixtures/22.05/squeue-letters/fields.txt).
_SQUEUE_NAMED_CONSTANTS = {
    "admin_comment": ("ADMIN_COMMENT", "(null)"), "boardspernode": ("BOARDS_PER_NODE", "0"),
    "burstbuffer": ("BURST_BUFFER", "(null)"), "burstbufferstate": ("BURST_BUFFER_STATE", "(null)"),
    "clusterfeature": ("CLUSTER_FEATURES", "(null)"), "container": ("CONTAINER", "(null)"),
    "cpus-per-tres": ("CPUS_PER_TRES", "N/A"), "deadline": ("DEADLINE", "N/A"), "delayboot": ("DELAY_BOOT", "0:00"),
    "derivedec": ("DERIVED_EC", "0"), "hetjobid": ("HET_JOB_ID", "N/A"), "hetjobidset": ("HET_JOB_ID_SET", "N/A"),
    "hetjoboffset": ("HET_JOB_OFFSET", "N/A"), "mcslabel": ("MCSLABEL", "(null)"),
    "mem-per-tres": ("MEM_PER_TRES", "N/A"), "mintime": ("TIME_MIN", "0:00"), "network": ("NETWORK", "(null)"),
    "ntperboard": ("NTASKS_PER_BOARD", "0"), "ntpercore": ("NTASKS_PER_CORE", "N/A"),
    "ntpernode": ("NTASKS_PER_NODE", "0"), "ntpersocket": ("NTASKS_PER_SOCKET", "N/A"), "origin": ("ORIGIN", "NA"),
    "originraw": ("ORIGIN_RAW", "NA"), "preempttime": ("PREEMPT_TIME", "N/A"), "prefer": ("PREFER", "(null)"),
    "profile": ("PROFILE", "NotSet"), "reboot": ("REBOOT", "0"), "reqswitch": ("REQ_SWITCH", "0"),
    "resizetime": ("RESIZE_TIME", "N/A"), "selectjobinfo": ("", ""), "siblingsactive": ("ACTIVE_SIBLINGS", "NA"),
    "siblingsactiveraw": ("ACTIVE_SIBLINGS_RAW", "NA"), "siblingsviable": ("VIABLE_SIBLINGS", "NA"),
    # sic: 22.05's header
    "siblingsviableraw": ("VIALBLE_SIBLINGS_RAW", "NA"), "sperboard": ("SOCKETS_PER_BOARD", "0"),
    "system_comment": ("SYSTEM_COMMENT", "(null)"), "tres-bind": ("TRES_BIND", "N/A"),
    "tres-freq": ("TRES_FREQ", "N/A"), "tres-per-socket": ("TRES_PER_SOCKET", "N/A"),
    "wait4switch": ("WAIT4SWITCH", "0:00"),
}
_SQUEUE_NAMED_FIELDS: dict[str, tuple[str, Callable[[SqueueJob], str]]] = {
    **{name: (header, lambda job, value=value: value) for name, (header, value) in _SQUEUE_NAMED_CONSTANTS.items()},
    "accruetime": ("ACCRUE_TIME", lambda job: _timestamp_cell(job.accrue_time)),
    "allocnodes": ("ALLOC_NODES", lambda job: job.alloc_node or "(null)"),
    "allocsid": ("ALLOC_SID", lambda job: str(job.alloc_sid)),
    "associd": ("ASSOC_ID", lambda job: str(job.assoc_id)),
    "lastschedeval": ("LAST_SCHED_EVAL", _last_sched_eval),
    "batchflag": ("BATCH_FLAG", lambda job: "1" if job.batch else "0"),
    "cluster": ("CLUSTER", attrgetter("cluster")),
    "cpus-per-task": ("CPUS_PER_TASK", lambda job: str(job.cpus_per_task)),
    "eligibletime": ("ELIGIBLE_TIME", lambda job: _timestamp_cell(job.eligible_time)),
    "exit_code": ("EXIT_CODE", lambda job: str(job.exit_status)),
    "maxcpus": ("MAX_CPUS", lambda job: str(job.cpus)),
    "maxnodes": ("MAX_NODES", lambda job: str(job.nodes)),
    "numtasks": ("TASKS", lambda job: str(job.num_tasks)),
    "pendingtime": ("PENDING_TIME", lambda job: str(job.pending_seconds)),
    "requeue": ("REQUEUE", lambda job: "1" if job.requeue else "0"),
    "restartcnt": ("RESTART_COUNT", lambda job: str(job.restart_count)),
    "stdin": ("STDIN", lambda job: _streams(job)[0]),
    "stdout": ("STDOUT", lambda job: _streams(job)[1]),
    "stderr": ("STDERR", lambda job: _streams(job)[2]),
    "tres-per-job": ("TRES_PER_JOB", lambda job: job.tres_per_job or "N/A"),
    "tres-per-task": ("TRES_PER_TASK", lambda job: job.tres_per_task or "N/A"),
    "tres-alloc": ("TRES_ALLOC", attrgetter("tres")),
}
#: squeue's older names of the heterogeneous job fields
_SQUEUE_NAMED_FIELDS.update({f"pack{name[3:]}": _SQUEUE_NAMED_FIELDS[name]
                             for name in ("hetjobid", "hetjobidset", "hetjoboffset")})
_SQUEUE_HEADERS.update({f"{{{name}}}": header for name, (header, _) in _SQUEUE_NAMED_FIELDS.items()})
_SQUEUE_GETTERS.update({f"{{{name}}}": getter for name, (_, getter) in _SQUEUE_NAMED_FIELDS.items()})
#: Fields whose value for a pending job moves with the clock (a pending job's line is otherwise kept).
SQUEUE_CLOCKED = ("{pendingtime}",)


#: Letters that show what only they read of a job (reports._SQUEUE_MORE_FIELDS), as the -O fields
#: without a letter (``{name}``) do.
_SQUEUE_MORE_LETTERS = frozenset("BgGUo")


def squeue_reads_more(format_text: str) -> bool:
    """Whether ``format_text`` shows a letter or -O field that reads more of a job than the others."""
    return any(token.letter in _SQUEUE_MORE_LETTERS or token.letter.startswith("{")
               for token in _parse_format(format_text)[1])


def squeue_reads_clock(format_text: str) -> bool:
    """Whether ``format_text`` shows a pending job something that changes with the time (PendingTime)."""
    return any(token in format_text for token in SQUEUE_CLOCKED)


def _squeue_getter(letter: str) -> Callable[[SqueueJob], str]:
    return _SQUEUE_GETTERS.get(letter, lambda job: "")


def in_squeue_order(items: Iterable[Any], *, partition: Callable[[Any], str], state: Callable[[Any], str],
                    priority: Callable[[Any], int]) -> list[Any]:
    """``items``, given in the order of squeue's first sort (reports.squeue_first_sort), in squeue's
    default order ``-S P,t,-p``: partition, state, descending priority; equal ones stay in the order
    given (src/squeue/sort.c ``sort_job_list``: one stable sort per key, last key first). ``t`` compares
    the states' short codes as strings (``_sort_job_by_state_compact``): CA, CD, CG, F, PD, R, S, TO
    (fixtures/22.05/finished-jobs/squeue-all.txt). Three stable sorts, each reading its key in C where
    the getter is an attrgetter/itemgetter (10,000 jobs: a third of a tuple key's cost)."""
    ordered = sorted(items, key=priority, reverse=True)  # reverse=True keeps equal priorities in their order
    # The state's code of each item computed in C (map), then a stable sort of their positions by it:
    # a lambda per item cost as much as the three other sorts together.
    ranks = list(map(STATE_CODES.get, map(state, ordered), repeat("")))
    ordered = list(map(ordered.__getitem__, sorted(range(len(ordered)), key=ranks.__getitem__)))
    ordered.sort(key=partition)
    return ordered


def squeue_order(jobs: Iterable[SqueueJob], *, start: bool = False) -> list[SqueueJob]:
    """The jobs squeue prints, in its order: ``-S P,t,-p`` (partition, state, descending priority; see
    in_squeue_order: ``jobs`` come in squeue's first sort's order), or with ``--start`` the pending jobs
    by expected start, unknown last, equal starts by job id (fixtures/22.05/scenario/squeue-start-running.txt,
    fixtures/22.05/order/b-squeue-start.txt)."""
    if start:
        return sorted((job for job in jobs if job.state == "PENDING"),
                      key=lambda job: (job.start_time is None, job.start_time or dt.datetime.max.replace(
                          tzinfo=dt.UTC), job.job_id))
    return in_squeue_order(jobs, partition=attrgetter("partition"), state=attrgetter("state"),
                           priority=attrgetter("priority"))


def squeue_format(*, long: bool = False, start: bool = False, format: str | None = None) -> str:
    """The -o format squeue lays its lines out with: ``format`` if given, else -l's, --start's or the default."""
    # "" is -O with only fields squeue does not know: a blank line per job
    return format if format is not None else (SQUEUE_START if start else SQUEUE_LONG if long else SQUEUE_DEFAULT)


def squeue_text(jobs: Iterable[SqueueJob], *, long: bool = False, start: bool = False, header: bool = True,
                format: str | None = None) -> str:
    """squeue's default, ``-l`` or ``--start`` output (see squeue_order)."""
    rows = squeue_order(jobs, start=start)
    return _render(squeue_format(long=long, start=start, format=format), _SQUEUE_HEADERS, _squeue_getter, rows,
                   header)


def squeue_lines(jobs: Sequence[SqueueJob], format_text: str) -> list[str]:
    """squeue's line of each job (format_text: squeue_format's), in the order given."""
    return _lines(format_text, _squeue_getter, jobs)


def squeue_header(format_text: str) -> str:
    return _header(format_text, _SQUEUE_HEADERS)


#: squeue -s (--steps): the running steps, their ids ``JOBID.N`` / ``JOBID.batch`` in the JOBID column.
SQUEUE_STEPS = "%.15i %.8j %.9P %.8u %.9M %N"


def squeue_steps_text(steps: Iterable[SqueueJob], *, header: bool = True) -> str:
    """squeue -s's default output (fixtures/22.05/srun/squeue-s-2.txt), in the order given."""
    return _render(SQUEUE_STEPS, {**_SQUEUE_HEADERS, "i": "STEPID"}, _squeue_getter, list(steps), header)


def squeue_rows(jobs: Iterable[SqueueJob]) -> list[dict[str, Any]]:
    return [{"jobId": job.job_id, "partition": job.partition, "name": job.name, "user": job.user, "state": job.state,
             "stateCode": STATE_CODES.get(job.state, job.state[:2]), "time": format_elapsed(job.elapsed_seconds),
             "timeLimit": format_time_limit(job.time_limit_minutes), "nodes": job.nodes, "nodelist": job.nodelist,
             "reason": job.reason, "priority": job.priority,
             "startTime": job.start_time.isoformat() if job.start_time else None, "schedNodes": job.sched_nodes,
             **({"arrayName": job.display_id} if job.array_job_id is not None else {})}
            for job in jobs]


# --- scontrol show step ----------------------------------------------------------------------

@dataclass(frozen=True)
class ScontrolStep:
    """One step as ``scontrol show step`` prints it; ``batch`` for ``JOBID.batch``; ``start`` None
    for an srun still waiting for its step (``JOBID.TDB``, PENDING)."""

    step_id: str
    user_id: int
    start: dt.datetime | None
    partition: str
    node_list: str
    nodes: int
    tasks: int
    name: str
    cpus: int = 0
    tres: str = ""
    srun_host: str = ""
    srun_pid: int = 0
    tres_per_step: str = ""
    tres_per_node: str = ""
    batch: bool = False
    #: srun -m's node level (block, cyclic, plane); "" without -m.
    distribution: str = ""


def _distribution(step: ScontrolStep) -> str:
    """srun -m's distribution (fixtures/22.05/srun-dist/out-1.txt: ``-m cyclic`` Cyclic, ``-m plane=2``
    Plane), else srun's default (steps.default_distribution); Unknown while its step waits."""
    if step.start is None:
        return "Unknown"
    return (step.distribution or default_distribution(step.tasks, step.nodes)).capitalize()


def scontrol_step_text(steps: Sequence[ScontrolStep], *, asked: str = "") -> str:
    """``scontrol show step [ASKED]`` in Slurm 22.05's layout (slurm:src/api/job_step_info.c;
    fixtures/22.05/steps/scontrol-step-*.txt, srun/scontrol-step-2.txt): every step a paragraph
    followed by a blank line. The batch script's step has no TRES, no Dist and no srun; a step's
    TresPerStep / TresPerNode lines as steps.tres_per says (none when empty). An srun waiting for
    its step has no step id yet (``TDB``), no name, no TRES and Dist=Unknown."""
    if not steps:
        return f"Job step {asked} not found\n" if asked else "No job steps in the system\n"
    out = []
    for step in steps:
        pending = step.start is None
        lines = [f"StepId={step.step_id} UserId={step.user_id} StartTime={_timestamp(step.start)} TimeLimit=UNLIMITED",
                 f"   State={'PENDING' if pending else 'RUNNING'} Partition={step.partition} NodeList={step.node_list}",
                 f"   Nodes={step.nodes} CPUs={step.cpus} Tasks={step.tasks} Name={step.name or '(null)'} Network=(null)",
                 f"   TRES={step.tres or '(null)'}",
                 "   ResvPorts=(null)"]
        if step.batch:
            lines += ["   CPUFreqReq=Default", "   SrunHost:Pid=(null):0"]
        else:
            lines += [f"   CPUFreqReq=Default Dist={_distribution(step)}",
                      f"   SrunHost:Pid={step.srun_host or '(null)'}:{step.srun_pid}"]
        lines += [f"   {name}={value}" for name, value in (("TresPerStep", step.tres_per_step),
                                                           ("TresPerNode", step.tres_per_node)) if value]
        out.append("\n".join(lines) + "\n\n")
    return "".join(out)


def scontrol_step_rows(steps: Iterable[ScontrolStep]) -> list[dict[str, Any]]:
    return [{"stepId": step.step_id, "userId": step.user_id, "state": "PENDING" if step.start is None else "RUNNING",
             "startTime": step.start.isoformat() if step.start else None,
             "partition": step.partition, "nodeList": step.node_list, "nodes": step.nodes, "cpus": step.cpus,
             "tasks": step.tasks, "name": step.name, "tres": step.tres or None,
             "srunHost": None if step.batch else step.srun_host, "srunPid": None if step.batch else step.srun_pid,
             "tresPerStep": step.tres_per_step or None, "tresPerNode": step.tres_per_node or None}
            for step in steps]


# --- sacct --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SacctJob:
    """One sacct record (a run of a job). ``state`` like COMPLETED or "CANCELLED by 1000"."""

    job_id: str
    name: str
    partition: str
    account: str
    alloc_cpus: int
    state: str
    exit_code: str = "0:0"
    user: str = ""
    elapsed_seconds: int = 0
    time_limit_minutes: int | None = None
    nnodes: int = 0
    nodelist: str = ""
    qos: str = ""
    priority: int = 0
    restarts: int = 0
    submit: dt.datetime | None = None
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    alloc_tres: str = ""
    #: ReqTRES: what the job asked (scontrol's TRES as requested, by name); blank for a step.
    req_tres: str = ""
    #: sacct's JobIDRaw where it differs from JobID (an array's records: JobID 1_7, JobIDRaw 9).
    job_id_raw: str = ""
    #: Tasks of a step (1 for the batch script); None (blank) for a job's own record.
    ntasks: int | None = None
    #: ReqCPUS and ReqNodes: what the job asked (scontrol_job.requested_cpus_and_nodes); AllocNodes: the
    #: nodes it got, 0 if it never ran (finished-jobs/sacct-x-more.txt).
    req_cpus: int = 0
    req_nodes: int = 0
    alloc_nodes: int = 0
    #: Reason: what slurmdbd was told the job waited for (accounting_reason); blank for a step.
    reason: str = ""


def _timestamp(moment: dt.datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S") if moment else "Unknown"


def accounting_reason(*, reason_prev_db: str, reason_recorded: str, started: bool) -> str:
    """sacct's Reason of a job record (sacct's print_fields PRINT_REASON): the state_reason_prev_db
    slurmctld sent slurmdbd with the job's last start record (scheduler.reason_prev_db), not squeue's
    reason. A job that ran: the one its start carried (``reason_prev_db``: Dependency, JobHeldUser,
    BeginTime, AssocGrpCpuLimit for jobs that waited on them, None for Resources and Priority;
    fixtures/22.05/acct-reason). A job that never ran: the one its first record carried
    (``reason_recorded``, services.accounting.job_records_sent), None if none was sent. So a job over its
    partition's limits shows what its submission gave it (PartitionConfig, limits.over_partition_limits) where
    one build kept that before its record went, PartitionNodeLimit after two, None before any
    (fixtures/22.05/part-reason; job-records/sacct-reason-j.txt, finished-jobs/sacct-x-more.txt: ``-N 5`` on a
    4-node partition PartitionConfig)."""
    if started:
        return reason_prev_db
    return reason_recorded or "None"


#: field name (lower case) -> (PrintField, value getter); widths from slurm:src/sacct/sacct.c
SACCT_FIELDS: dict[str, tuple[PrintField, Callable[[SacctJob], Any]]] = {
    "jobid": (PrintField("JobID", -12), lambda j: j.job_id),
    "jobidraw": (PrintField("JobIDRaw", -12), lambda j: j.job_id_raw or j.job_id),
    "jobname": (PrintField("JobName", 10), lambda j: j.name),
    "partition": (PrintField("Partition", 10), lambda j: j.partition),
    "account": (PrintField("Account", 10), lambda j: j.account),
    "alloccpus": (PrintField("AllocCPUS", 10, "uint"), lambda j: j.alloc_cpus),
    "state": (PrintField("State", 10), lambda j: j.state),
    "exitcode": (PrintField("ExitCode", 8), lambda j: j.exit_code),
    "user": (PrintField("User", 9), lambda j: j.user),
    "elapsed": (PrintField("Elapsed", 10, "time_secs"), lambda j: j.elapsed_seconds),
    "timelimit": (PrintField("Timelimit", 10), lambda j: format_time_limit_sacct(j.time_limit_minutes)),
    "cputime": (PrintField("CPUTime", 10, "time_secs"), lambda j: j.elapsed_seconds * j.alloc_cpus),
    "nnodes": (PrintField("NNodes", 8, "uint"), lambda j: j.nnodes),
    "nodelist": (PrintField("NodeList", 15), lambda j: j.nodelist),
    "qos": (PrintField("QOS", 10), lambda j: j.qos),
    "priority": (PrintField("Priority", 10, "uint"), lambda j: j.priority),
    "restarts": (PrintField("Restarts", 8, "uint"), lambda j: j.restarts),
    "submit": (PrintField("Submit", 19), lambda j: _timestamp(j.submit)),
    # a job that ended without starting: None, where a pending one's start is Unknown (22.05.8: cancelled
    # while pending; fixtures/22.05/node-range/sacct-times.txt plan-N2-4)
    "start": (PrintField("Start", 19), lambda j: _timestamp(j.start) if j.start or j.state == "PENDING" else "None"),
    "end": (PrintField("End", 19), lambda j: _timestamp(j.end)),
    "alloctres": (PrintField("AllocTRES", 10), lambda j: j.alloc_tres),
    "reqtres": (PrintField("ReqTRES", 10), lambda j: j.req_tres),
    "ntasks": (PrintField("NTasks", 8, "uint"), lambda j: j.ntasks),
    "ncpus": (PrintField("NCPUS", 10, "uint"), lambda j: j.alloc_cpus),
    "reqcpus": (PrintField("ReqCPUS", 8, "uint"), lambda j: j.req_cpus),
    "reqnodes": (PrintField("ReqNodes", 8, "uint"), lambda j: j.req_nodes),
    "allocnodes": (PrintField("AllocNodes", 10, "uint"), lambda j: j.alloc_nodes),
    "reason": (PrintField("Reason", 22), lambda j: j.reason),
}
SACCT_DEFAULT_FIELDS = ("jobid", "jobname", "partition", "account", "alloccpus", "state", "exitcode")


def format_time_limit_sacct(minutes: int | None) -> str:
    """sacct's Timelimit: ``mins2time_str`` (``UNLIMITED``, ``01:00:00``, ``1-00:00:00``)."""
    return format_secs(None if minutes is None else minutes * 60)


#: The widest column a ``name%width`` format item may ask for: wider only fills a page with spaces
#: for every row (and a width past memory crashed the command).
MAX_FIELD_WIDTH = 1000
_WIDTH = re.compile(r"-?[0-9]+")


def format_width(item: str, width: str) -> int:
    """The width of format item ``item`` (its text after ``%``): 0, the field's own width, unless it is
    a whole number (as Slurm's atoi reads it; negative left-justifies). Raises ValueError for one
    wider than MAX_FIELD_WIDTH."""
    if not _WIDTH.fullmatch(width):
        return 0
    if abs(int(width)) > MAX_FIELD_WIDTH:
        raise ValueError(f'Invalid field width requested: "{item}" (at most {MAX_FIELD_WIDTH})')
    return int(width)


def _sacct_selection(fields: Sequence[str] | None) -> list[tuple[PrintField, Callable[[SacctJob], Any]]]:
    """``--format`` items (case-insensitive, ``name%width`` overrides the width)."""
    chosen = []
    for item in fields or SACCT_DEFAULT_FIELDS:
        name, _, width = item.partition("%")
        if name.lower() not in SACCT_FIELDS:
            raise ValueError(f'Invalid field requested: "{name}"')
        print_field, getter = SACCT_FIELDS[name.lower()]
        chosen_width = format_width(item, width)
        if chosen_width:
            print_field = print_field.with_width(chosen_width)
        chosen.append((print_field, getter))
    return chosen


def sacct_text(jobs: Iterable[SacctJob], *, fields: Sequence[str] | None = None, parsable: str | None = None,
               header: bool = True) -> str:
    chosen = _sacct_selection(fields)
    return print_fields([f for f, _ in chosen], ([getter(job) for _, getter in chosen] for job in jobs),
                        parsable=parsable, header=header)


def sacct_rows(jobs: Iterable[SacctJob], *, fields: Sequence[str] | None = None) -> list[dict[str, Any]]:
    chosen = _sacct_selection(fields)
    return [{f.name: getter(job) for f, getter in chosen} for job in jobs]
