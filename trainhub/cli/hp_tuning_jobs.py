"""`trainhub ai hp-tuning-jobs create|list|describe|cancel`, as `gcloud ai hp-tuning-jobs`.

`create --config FILE` takes a whole HyperparameterTuningJob in YAML (displayName, studySpec,
maxTrialCount, parallelTrialCount, maxFailedTrialCount, trialJobSpec), as gcloud does; the flags
--display-name, --max-trial-count, --parallel-trial-count, --algorithm and --labels override the
file, and the trial counts default to 1 when neither gives them (gcloud's rule).
"""

from __future__ import annotations

from trainhub.cli import base as cli
from trainhub.cli.client import ResourceRef, parse_resource_ref, resource_path
from trainhub.cli.worker_pool_spec import load_job_spec_config, parse_key_values

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from typing import Any

COLLECTION = "hyperparameterTuningJobs"
ALGORITHMS = {"algorithm-unspecified": "ALGORITHM_UNSPECIFIED", "grid-search": "GRID_SEARCH",
              "random-search": "RANDOM_SEARCH"}

_CREATED_MESSAGE = """\
Hyperparameter tuning job [{name}] submitted successfully.

Your job is still active. You may view the status of your job with the command

  $ trainhub ai hp-tuning-jobs describe {name}"""

_CANCEL_MESSAGE = """\
Request to cancel hyperparameter tuning job [{job_id}] has been sent

You may view the status of your job with the command

  $ trainhub ai hp-tuning-jobs describe {name}"""


def _best_trial(job: dict[str, Any]) -> str:
    return str((job.get("trainhubStatus") or {}).get("bestTrialId") or "")


COLUMNS: tuple[cli.Column, ...] = (
    ("JOB_ID", lambda job: str(job.get("name", "")).rsplit("/", 1)[-1]),
    ("DISPLAY_NAME", cli._field("displayName")),
    ("STATE", cli._field("state")),
    ("TRIALS", lambda job: f"{len(job.get('trials') or [])}/{job.get('maxTrialCount', '')}"),
    ("BEST_TRIAL", _best_trial),
    ("CREATE_TIME", cli._field("createTime")),
)


def register(subparsers: Any, common: cli.ArgumentParser) -> None:
    jobs = cli._add_group(subparsers, "hp-tuning-jobs", "manage hyperparameter tuning jobs", common)

    create = cli._add_command(jobs, "create", create_job, "create a hyperparameter tuning job", common)
    cli._add_region(create, required=True)
    create.add_argument("--display-name", required=True, help="display name of the job")
    create.add_argument("--config", metavar="FILE", required=True,
                        help="YAML file holding a HyperparameterTuningJob (studySpec, trialJobSpec, ...)")
    create.add_argument("--max-trial-count", type=cli._positive(int), help="total trials (default 1)")
    create.add_argument("--parallel-trial-count", type=cli._positive(int), help="trials at once (default 1)")
    create.add_argument("--algorithm", choices=sorted(ALGORITHMS), help="search algorithm (default: Bayesian)")
    create.add_argument("--labels", type=cli._arg_type(parse_key_values), metavar="KEY=VALUE,...",
                        help="labels of the job")

    listing = cli._add_command(jobs, "list", list_jobs, "list hyperparameter tuning jobs", common)
    cli._add_region(listing, required=True)
    listing.add_argument("--limit", type=cli._positive(int), help="stop after this many jobs")
    listing.add_argument("--page-size", type=cli._positive(int), help="jobs to request per page")
    cli._add_format(listing, ("table", "json", "yaml"))

    describe = cli._add_command(jobs, "describe", describe_job, "show a hyperparameter tuning job", common)
    _add_tuning_job(describe)
    cli._add_format(describe, ("yaml", "json"))

    _add_tuning_job(cli._add_command(jobs, "cancel", cancel_job, "cancel a hyperparameter tuning job", common))


def _add_tuning_job(parser: cli.ArgumentParser) -> None:
    parser.add_argument("job", metavar="HP_TUNING_JOB",
                        help="job ID or full name projects/P/locations/L/hyperparameterTuningJobs/ID")
    cli._add_region(parser, required=False)


def _ref(ctx: cli.Context) -> ResourceRef:
    try:
        return parse_resource_ref(ctx.args.job, collection=COLLECTION, project=ctx.settings.project,
                                  location=ctx.args.region)
    except ValueError as exc:
        ctx.usage_error(str(exc))


def build_tuning_job(config: dict[str, Any], *, display_name: str, max_trial_count: int | None,
                     parallel_trial_count: int | None, algorithm: str | None,
                     labels: dict[str, str] | None) -> dict[str, Any]:
    """The HyperparameterTuningJob body: the config file's document with the flags applied."""
    body = dict(config)
    body["displayName"] = display_name
    for key, flag in (("maxTrialCount", max_trial_count), ("parallelTrialCount", parallel_trial_count)):
        if flag is not None:
            body[key] = flag
        body.setdefault(key, 1)
    if algorithm is not None:
        body["studySpec"] = {**(body.get("studySpec") or {}), "algorithm": ALGORITHMS[algorithm]}
    if labels:
        body["labels"] = labels
    return body


def create_job(ctx: cli.Context) -> int:
    args = ctx.args
    body = build_tuning_job(load_job_spec_config(args.config), display_name=args.display_name,
                            max_trial_count=args.max_trial_count, parallel_trial_count=args.parallel_trial_count,
                            algorithm=args.algorithm, labels=args.labels)
    client = ctx.client()
    job = client.post(resource_path(client.project, args.region, COLLECTION), body)
    cli._write(_CREATED_MESSAGE.format(name=job.get("name", "")))
    return 0


def list_jobs(ctx: cli.Context) -> int:
    args = ctx.args
    client = ctx.client()
    path = resource_path(client.project, args.region, COLLECTION)
    jobs = list(cli._paginate(client, path, COLLECTION, {"pageSize": args.page_size or args.limit}, args.limit))
    cli._print_resources(jobs, args.format, COLUMNS)
    return 0


def describe_job(ctx: cli.Context) -> int:
    cli._write(cli._render(ctx.client().get(_ref(ctx).path()), ctx.args.format))
    return 0


def cancel_job(ctx: cli.Context) -> int:
    ref = _ref(ctx)
    ctx.client().post(ref.path(":cancel"), {})
    cli._write(_CANCEL_MESSAGE.format(job_id=ref.resource_id, name=ref.name))
    return 0
