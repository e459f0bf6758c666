"""`trainhub ai custom-jobs create|list|describe|cancel|stream-logs`, as `gcloud ai custom-jobs`."""

from __future__ import annotations

from trainhub.cli import base as cli
from trainhub.cli.client import ResourceRef, resource_path
from trainhub.cli.worker_pool_spec import (
    SpecError,
    build_custom_job,
    load_job_spec_config,
    parse_key_values,
    parse_worker_pool_spec,
    split_list,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

DEFAULT_POLLING_INTERVAL_SECONDS = 2.0
CUSTOM_JOBS = "customJobs"
TERMINAL_JOB_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"})

_JOB_CREATED_MESSAGE = """\
CustomJob [{name}] is submitted successfully.

Your job is still active. You may view the status of your job with the command

  $ trainhub ai custom-jobs describe {name}

or continue streaming the logs with the command

  $ trainhub ai custom-jobs stream-logs {name}"""

_JOB_CANCEL_MESSAGE = """\
Request to cancel custom job [{job_id}] has been sent

You may view the status of your job with the command

  $ trainhub ai custom-jobs describe {name}"""

CUSTOM_JOB_COLUMNS: tuple[cli.Column, ...] = (
    ("JOB_ID", lambda job: str(job.get("name", "")).rsplit("/", 1)[-1]),
    ("DISPLAY_NAME", cli._field("displayName")),
    ("STATE", cli._field("state")),
    ("CREATE_TIME", cli._field("createTime")),
)


def register_custom_jobs(subparsers: Any, common: cli.ArgumentParser) -> None:
    """`trainhub ai custom-jobs create|list|describe|cancel|stream-logs`."""
    jobs = cli._add_group(subparsers, "custom-jobs", "manage custom training jobs", common)

    create = cli._add_command(jobs, "create", custom_jobs_create, "create a custom job", common)
    cli._add_region(create, required=True)
    create.add_argument("--display-name", required=True, help="display name of the job")
    create.add_argument("--config", metavar="FILE", help="YAML file holding a CustomJobSpec; flags override its values")
    create.add_argument("--worker-pool-spec", action="append", type=cli._arg_type(parse_worker_pool_spec),
                        metavar="SPEC", help="machine-type=M,replica-count=N,accelerator-type=T,accelerator-count=N,"
                        "container-image-uri=U | executor-image-uri=U,python-module=M (repeat for more pools)")
    create.add_argument("--command", type=split_list, metavar="ARG,...",
                        help="container entrypoint for every pool")
    create.add_argument("--args", type=split_list, metavar="ARG,...",
                        help="arguments for every pool (write --args=--flag=1 when the first starts with -)")
    create.add_argument("--python-package-uris", type=split_list, metavar="URI,...",
                        help="packages for the executor-image-uri pools")
    create.add_argument("--labels", type=cli._arg_type(parse_key_values), metavar="KEY=VALUE,...",
                        help="labels of the job")
    create.add_argument("--persistent-resource-id", metavar="ID", help="run on this persistent resource")

    listing = cli._add_command(jobs, "list", custom_jobs_list, "list custom jobs", common)
    cli._add_region(listing, required=True)
    listing.add_argument("--filter", help="server-side filter expression, e.g. state=JOB_STATE_RUNNING")
    listing.add_argument("--limit", type=cli._positive(int), help="stop after this many jobs")
    listing.add_argument("--page-size", type=cli._positive(int), help="jobs to request per page")
    cli._add_format(listing, ("table", "json", "yaml"))

    describe = cli._add_command(jobs, "describe", custom_jobs_describe, "show a custom job", common)
    _add_job(describe)
    cli._add_format(describe, ("yaml", "json"))

    _add_job(cli._add_command(jobs, "cancel", custom_jobs_cancel, "cancel a custom job", common))

    stream = cli._add_command(jobs, "stream-logs", custom_jobs_stream_logs, "print a job's logs until it ends", common)
    _add_job(stream)
    stream.add_argument("--polling-interval", type=cli._positive(float), default=DEFAULT_POLLING_INTERVAL_SECONDS,
                        metavar="SECONDS", help="seconds between polls (default %(default)s)")
    stream.add_argument("--task-name", help="only this task's logs, e.g. workerpool0-0")


def _add_job(parser: cli.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOB", help="job ID or full name projects/P/locations/L/customJobs/ID")
    cli._add_region(parser, required=False)


def _job(ctx: cli.Context) -> ResourceRef:
    """The custom job named by the JOB argument and --region."""
    return ctx.resource(ctx.args.job, CUSTOM_JOBS)


def custom_jobs_create(ctx: cli.Context) -> int:
    """Submit a CustomJob built from --config and the flags."""
    args = ctx.args
    try:
        body = build_custom_job(
            display_name=args.display_name,
            config=load_job_spec_config(args.config) if args.config else None,
            worker_pool_specs=args.worker_pool_spec,
            command=args.command,
            args=args.args,
            python_package_uris=args.python_package_uris,
            labels=args.labels,
            persistent_resource_id=args.persistent_resource_id,
        )
    except SpecError as exc:
        ctx.usage_error(str(exc))
    client = ctx.client()
    job = client.post(resource_path(client.project, args.region, CUSTOM_JOBS), body)
    cli._write(_JOB_CREATED_MESSAGE.format(name=job.get("name", "")))
    return 0


def custom_jobs_list(ctx: cli.Context) -> int:
    """List jobs of the region as a table, or raw as JSON / YAML."""
    args = ctx.args
    client = ctx.client()
    params = {"filter": args.filter, "pageSize": args.page_size or args.limit}
    path = resource_path(client.project, args.region, CUSTOM_JOBS)
    jobs = list(cli._paginate(client, path, CUSTOM_JOBS, params, args.limit))
    cli._print_resources(jobs, args.format, CUSTOM_JOB_COLUMNS)
    return 0


def custom_jobs_describe(ctx: cli.Context) -> int:
    """Print one job."""
    job = ctx.client().get(_job(ctx).path())
    cli._write(cli._render(job, ctx.args.format))
    return 0


def custom_jobs_cancel(ctx: cli.Context) -> int:
    """Ask the server to cancel a job; cancellation itself is asynchronous."""
    ref = _job(ctx)
    ctx.client().post(ref.path(":cancel"), {})
    cli._write(_JOB_CANCEL_MESSAGE.format(job_id=ref.resource_id, name=ref.name))
    return 0


def format_log_entry(entry: Mapping[str, Any]) -> str:
    """One log line as gcloud prints it: `INFO<TAB>time<TAB>task<TAB>text` (ERROR for stderr)."""
    severity = "ERROR" if entry.get("stream") == "stderr" else "INFO"
    text = str(entry.get("text", "")).rstrip("\n")
    return f"{severity}\t{entry.get('time', '')}\t{entry.get('taskName', '')}\t{text}"


def custom_jobs_stream_logs(ctx: cli.Context) -> int:
    """Print log entries as they arrive until the job has ended and no entry is left."""
    args = ctx.args
    path = _job(ctx).path("/logs")
    client = ctx.client()
    after = 0
    while True:
        page = client.get(path, {"after": after, "taskName": args.task_name})
        entries = page.get("entries") or []
        for entry in entries:
            cli._write(format_log_entry(entry))
        after = page.get("nextAfter", max((int(entry.get("id", after)) for entry in entries), default=after))
        if entries:
            continue  # more may be waiting; only an empty answer means we are caught up
        if page.get("jobState") in TERMINAL_JOB_STATES:
            return 0
        cli._sleep(args.polling_interval)
