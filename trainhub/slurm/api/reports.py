"""squeue, sprio, sshare, sacct, sinfo, scontrol show step (``steps``), job (``scontrolJobs``), partition
(``scontrolPartitions``) and node (``scontrolNodes``) as JSON: ``{"text": <the command's whole output>, "rows": [...],
"nextPageToken"}``; rows come a page at a time (``pageSize``, default 100, at most 10,000). A request
that accepts ``text/plain`` first (the CLI) is answered the text alone, as text/plain.

Query parameters are the commands' flags by their long names (``long``, ``start``, ``weights``,
``norm``, ``all``, ``duplicates``, ``brief``, ``allocations`` (sacct -X), ``parsable`` (sacct -p)
are booleans; ``user``, ``partition``, ``states``, ``jobs``, ``accounts``, ``users``, ``state``, ``format`` take comma lists; sacct's ``starttime`` /
``endtime`` take a date, a time or YYYY-MM-DDTHH:MM[:SS])."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from trainhub.common.collector import collector_paused
from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.wire import WireError, parse_int
from trainhub.slurm import formats, reports
from trainhub.slurm.api.clusters import cluster_for
from trainhub.slurm.api.schema import BODY, ERRORS, REPORT_PARAMETERS, responses
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.sbatch import SbatchError, parse_begin

LIST = "aiplatform.slurmJobs.list"
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 10_000
TRUE = ("1", "true", "yes", "on")


def flag(params, name: str) -> bool:
    return str(params.get(name, "")).lower() in TRUE


def moment(params, name: str, now: dt.datetime) -> dt.datetime | None:
    text = params.get(name, "")
    if not text:
        return None
    try:
        return parse_begin(text, now)
    except SbatchError as exc:
        raise invalid_argument([FieldViolation(name, f"invalid time {text!r}")]) from exc


def squeue_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                  page: slice | None = None) -> reports.Report:
    """``format`` is squeue's -o, ``outputFormat`` its -O (a field squeue does not know is left out, its
    error line in the answer's ``stderr``); ``steps`` its -s."""
    if flag(params, "steps"):
        return reports.squeue_steps(cluster, now=now, user=params.get("user", ""), jobs=params.get("jobs", ""))
    format_text = params.get("format") or None
    unknown: list[str] = []
    if params.get("outputFormat"):
        format_text = formats.squeue_long_format(params["outputFormat"], unknown=unknown)
    try:
        report = reports.squeue(cluster, now=now, user=params.get("user", ""), partition=params.get("partition", ""),
                                states=params.get("states", ""), jobs=params.get("jobs", ""),
                                long=flag(params, "long"), start=flag(params, "start"), format=format_text,
                                page=page, array_tasks=flag(params, "array"))
    except ValueError as exc:  # a -t state squeue does not know, with its error lines
        raise invalid_argument([FieldViolation("states", str(exc).rstrip())], str(exc).rstrip()) from exc
    report.stderr = "".join(f"{line}\n" for line in unknown)
    return report


def sprio_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                 page: slice | None = None) -> reports.Report:
    return reports.sprio(cluster, now=now, long=flag(params, "long"), weights=flag(params, "weights"),
                         norm=flag(params, "norm"), user=params.get("user", ""), jobs=params.get("jobs", ""),
                         partition=params.get("partition", ""), page=page)


def sshare_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime) -> reports.Report:
    return reports.sshare(cluster, now=now, viewer=viewer, long=flag(params, "long"), all_users=flag(params, "all"),
                          accounts=params.get("accounts", ""), users=params.get("users", ""))


def sacct_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                 page: slice | None = None) -> reports.Report:
    fields = [item for item in params.get("format", "").split(",") if item.strip()] or None
    try:
        return reports.sacct(cluster, now=now, viewer=viewer, jobs=params.get("jobs", ""), user=params.get("user", ""),
                             all_users=flag(params, "allusers"), duplicates=flag(params, "duplicates"),
                             starttime=moment(params, "starttime", now), endtime=moment(params, "endtime", now),
                             state=params.get("state", ""), brief=flag(params, "brief"),
                             allocations=flag(params, "allocations"), parsable=flag(params, "parsable"),
                             fields=fields, page=page)
    except ValueError as exc:  # formats refuses an unknown --format field with sacct's message
        raise invalid_argument([FieldViolation("format", str(exc))], str(exc)) from exc


class FormatIsAFlag(DefaultContentNegotiation):
    """sacct's --format travels as ``?format=``, the query parameter DRF reads as a renderer's name
    (answering 404 to any but ``json``): the reports answer JSON, their only renderer, whatever it says."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def sinfo_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                 page: slice | None = None) -> reports.Report:
    """``nodes`` is sinfo's -N, ``long`` -l, ``summarize`` -s, ``reasons`` -R."""
    return reports.sinfo(cluster, now=now, node_oriented=flag(params, "nodes"), long=flag(params, "long"),
                         summarize=flag(params, "summarize"), reasons=flag(params, "reasons"),
                         partition=params.get("partition", ""))


def steps_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                 page: slice | None = None) -> reports.Report:
    """scontrol show step [``step``]: ``step`` is JOBID, JOBID.STEPID or JOBID.batch."""
    try:
        return reports.scontrol_steps(cluster, now=now, step=params.get("step", "").strip())
    except ValueError as exc:
        raise invalid_argument([FieldViolation("step", str(exc))], str(exc)) from exc


def jobs_text_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                     page: slice | None = None) -> reports.Report:
    """scontrol [-o] show job [``job``]: ``oneliner`` is -o."""
    try:
        return reports.scontrol_jobs(cluster, now=now, job=params.get("job", "").strip(),
                                     one_liner=flag(params, "oneliner"))
    except ValueError as exc:
        raise invalid_argument([FieldViolation("job", str(exc))], str(exc)) from exc


class NamesNotFound(ApiError):
    """scontrol show node's (partition's) names that no node (partition) has: a 404 whose message is
    scontrol's ``Node NAME not found`` line(s), its body's ``text`` all scontrol printed (the nodes it
    found too), which the CLI prints before exiting 1 as scontrol does."""

    def __init__(self, report: reports.Report) -> None:
        super().__init__(404, "\n".join(report.missing))
        self.report = report

    def body(self) -> dict:
        return {**super().body(), "text": self.report.text}


def nodes_text_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                      page: slice | None = None) -> reports.Report:
    """scontrol [-o] show node [``node``]: ``node`` a node name or a host list (gpu1,gpu[3-4]), in
    the order it lists them; ``oneliner`` is -o. A list scontrol cannot parse is a 400 with its
    message, a name no node has a 404 (NamesNotFound)."""
    try:
        report = reports.scontrol_nodes(cluster, now=now, nodes=params.get("node", "").strip(),
                                        one_liner=flag(params, "oneliner"))
    except ValueError as exc:
        raise invalid_argument([FieldViolation("node", str(exc))], str(exc)) from exc
    if report.missing:
        raise NamesNotFound(report)
    return report


def partitions_text_report(cluster: SlurmCluster, params, viewer: str, now: dt.datetime,
                           page: slice | None = None) -> reports.Report:
    """scontrol [-o] show partition [``partition``]: ``oneliner`` is -o; a name no partition has is a
    404 (NamesNotFound)."""
    report = reports.scontrol_partitions(cluster, now=now, partition=params.get("partition", "").strip(),
                                         one_liner=flag(params, "oneliner"))
    if report.missing:
        raise NamesNotFound(report)
    return report


REPORTS: dict[str, Callable[..., reports.Report]] = {
    "squeue": squeue_report, "sprio": sprio_report, "sshare": sshare_report, "sacct": sacct_report,
    "sinfo": sinfo_report, "steps": steps_report, "scontrolJobs": jobs_text_report,
    "scontrolPartitions": partitions_text_report, "scontrolNodes": nodes_text_report}


#: The longest report text whose JSON is kept (_text_json): 4 MiB is some 50,000 sprio lines. Each
#: process keeps at most KEPT_TEXTS texts and their JSON, so at most ~35 MB; a longer text (squeue -t all
#: over a large history) is encoded on every read rather than held.
KEPT_TEXT_LIMIT = 4 * 1024 * 1024
KEPT_TEXTS = 4


@functools.lru_cache(maxsize=KEPT_TEXTS)
def _kept_text_json(text: str) -> bytes:
    return JSONRenderer().render(text)


def _text_json(text: str) -> bytes:
    """A report's text as JSON, as DRF's renderer writes it. A report read again unchanged is the
    same text (reports' ReportCache keeps sprio's; squeue's compares equal), so its encoding is kept
    too: encoding 10,000 sprio lines took 3-5 ms, a third of the read's CPU (issue 21)."""
    return _kept_text_json(text) if len(text) <= KEPT_TEXT_LIMIT else JSONRenderer().render(text)


def _answer(body: dict) -> HttpResponse:
    """The report's JSON answer, byte for byte what ``Response(body)`` renders, ``text`` first."""
    rest = JSONRenderer().render({key: value for key, value in body.items() if key != "text"})
    return HttpResponse(b'{"text":' + _text_json(body["text"]) + (b"," + rest[1:] if rest != b"{}" else b"}"),
                        content_type="application/json")


def _view(name: str) -> type[APIView]:
    build = REPORTS[name]

    class ReportView(APIView):
        content_negotiation_class = FormatIsAFlag

        @extend_schema(operation_id=f"slurmClusters.{name}", parameters=REPORT_PARAMETERS[name],
                       responses=responses(BODY, ERRORS))
        def get(self, request: Request, project: str, location: str, cluster: str) -> HttpResponse:
            cluster_obj = cluster_for(request, project, location, cluster, LIST)
            params = request.query_params
            try:
                size = parse_int(params.get("pageSize") or DEFAULT_PAGE_SIZE, minimum=1, maximum=MAX_PAGE_SIZE)
                start = parse_int(params.get("pageToken") or 0, minimum=0)
            except WireError as exc:
                raise invalid_argument([FieldViolation("pageSize/pageToken", str(exc))]) from exc
            # A report over a long queue makes tens of thousands of objects without a cycle; the
            # collector would run ~70 times per 10k sprio for nothing (issue 21). They are freed
            # before it resumes: alive then, the first allocation after would scan them all.
            # ``Accept: text/plain`` (the CLI): the command's output alone, without the rows and JSON.
            plain = request.META.get("HTTP_ACCEPT", "").startswith("text/plain")
            with collector_paused():
                report = build(cluster_obj, params, request.user.get_username(), timezone.now())
                if plain and not report.stderr:
                    body = report.text
                elif plain:  # squeue's error lines too: the text and them, still without the rows
                    body = {"text": report.text, "stderr": report.stderr}
                else:
                    body = {"text": report.text, "rows": report.rows(start, size)}
                    if report.stderr:
                        body["stderr"] = report.stderr
                    if start + size < len(report.items):
                        body["nextPageToken"] = str(start + size)
                del report
            if isinstance(body, str):
                return HttpResponse(body, content_type="text/plain; charset=utf-8")
            return _answer(body)

    ReportView.__name__ = f"{name.capitalize()}View"
    return ReportView


(SqueueView, SprioView, SshareView, SacctView, SinfoView, StepsView, ScontrolJobsView, ScontrolPartitionsView,
 ScontrolNodesView) = (_view(name) for name in ("squeue", "sprio", "sshare", "sacct", "sinfo", "steps", "scontrolJobs",
                                               "scontrolPartitions", "scontrolNodes"))
