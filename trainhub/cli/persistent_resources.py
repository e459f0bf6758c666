"""`trainhub ai persistent-resources create|list|describe|update|reboot|delete` and
`trainhub ai operations describe`, modelled on gcloud's commands of the same names.

Create, update, reboot and delete answer a long-running operation at once; like gcloud, the
command prints what was sent and how to follow it (`operations describe`), and `--wait` polls
the operation until it is done instead. The shared command machinery is trainhub.cli.base;
trainhub.cli.main registers these groups.
"""

from __future__ import annotations

from trainhub.cli import base as cli
from trainhub.cli.base import ArgumentParser, Context
from trainhub.cli.client import CliError, resource_path
from trainhub.cli.resource_pool_spec import (
    build_persistent_resource,
    build_update,
    parse_resize_spec,
    parse_resource_pool_spec,
)
from trainhub.cli.worker_pool_spec import SpecError, load_config_mapping, parse_key_values

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from typing import Any

PERSISTENT_RESOURCES = "persistentResources"
OPERATIONS = "operations"
DEFAULT_WAIT_INTERVAL_SECONDS = 2.0

_SUBMITTED = """\
{sent}

You may view the status of your PersistentResource with the command

  $ trainhub ai persistent-resources describe {resource_id} --region {region}

and of this operation with

  $ trainhub ai operations describe {operation_id} --region {region}"""


def register_persistent_resources(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub ai persistent-resources create|list|describe|update|reboot|delete`."""
    group = cli._add_group(subparsers, "persistent-resources", "manage persistent resources", common)

    create = cli._add_command(group, "create", persistent_resources_create, "create a persistent resource", common)
    cli._add_region(create, required=True)
    create.add_argument("--persistent-resource-id", required=True, metavar="ID", help="ID of the new resource")
    create.add_argument("--display-name", help="display name of the resource")
    create.add_argument("--config", metavar="FILE",
                        help="YAML or JSON PersistentResource (resourcePools: or resourcePoolSpecs:); "
                             "flags add pools and override its displayName, labels and network")
    create.add_argument("--resource-pool-spec", action="append", type=cli._arg_type(parse_resource_pool_spec),
                        metavar="SPEC", help="machine-type=M,replica-count=N,min-replica-count=N,max-replica-count=N,"
                        "accelerator-type=T,accelerator-count=N,disk-type=D,disk-size=GB (repeat for more pools)")
    create.add_argument("--labels", type=cli._arg_type(parse_key_values), metavar="KEY=VALUE,...")
    create.add_argument("--network", help="network to peer with (stored and shown)")
    _add_wait(create)

    listing = cli._add_command(group, "list", persistent_resources_list, "list persistent resources", common)
    cli._add_region(listing, required=True)
    listing.add_argument("--limit", type=cli._positive(int), help="stop after this many resources")
    listing.add_argument("--page-size", type=cli._positive(int), help="resources to request per page")
    cli._add_format(listing, ("table", "json", "yaml"))

    describe = cli._add_command(group, "describe", persistent_resources_describe, "show a persistent resource", common)
    _add_resource(describe)
    cli._add_format(describe, ("yaml", "json"))

    update = cli._add_command(group, "update", persistent_resources_update,
                              "change a persistent resource's display name, labels or pool sizes", common)
    _add_resource(update)
    update.add_argument("--display-name", help="new display name")
    update.add_argument("--labels", type=cli._arg_type(parse_key_values), metavar="KEY=VALUE,...",
                        help="new labels (replace all)")
    update.add_argument("--resource-pool-spec", action="append", type=cli._arg_type(parse_resize_spec),
                        metavar="SPEC", help="id=POOL,replica-count=N | id=POOL,min-replica-count=N,max-replica-count=N")
    _add_wait(update)

    for name, handler, help_text in (("reboot", persistent_resources_reboot, "reboot a persistent resource"),
                                     ("delete", persistent_resources_delete, "delete a persistent resource")):
        command = cli._add_command(group, name, handler, help_text, common)
        _add_resource(command)
        _add_wait(command)


def register_operations(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub ai operations describe`."""
    group = cli._add_group(subparsers, "operations", "inspect long-running operations", common)
    describe = cli._add_command(group, "describe", operations_describe, "show an operation", common)
    describe.add_argument("operation", metavar="OPERATION",
                          help="operation ID or its full name .../operations/ID")
    cli._add_region(describe, required=False)
    cli._add_format(describe, ("yaml", "json"))


def _add_resource(parser: ArgumentParser) -> None:
    parser.add_argument("resource", metavar="PERSISTENT_RESOURCE",
                        help="resource ID or full name projects/P/locations/L/persistentResources/ID")
    cli._add_region(parser, required=False)


def _add_wait(parser: ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true", help="poll the operation until it is done")


def _operation_path(ctx: Context) -> str:
    """The API path of the OPERATION argument: a bare ID (with --region) or any operation name."""
    value = ctx.args.operation
    if "/" in value:
        if not value.startswith("projects/") or "/operations/" not in value:
            ctx.usage_error(f"expected an operation ID or a name ending in /operations/ID, got [{value}]")
        return "/v1/" + value
    if not ctx.args.region:
        ctx.usage_error("--region is required unless a full operation name is given")
    return resource_path(ctx.settings.project, ctx.args.region, OPERATIONS, value)


def _finish(ctx: Context, operation: dict[str, Any], sent: str, name: str) -> int:
    """Print what gcloud prints for a submitted operation (``sent``, then how to follow it), or
    with --wait poll the operation until it is done."""
    _, region, resource_id = name.split("/")[1::2]
    if not ctx.args.wait:
        cli._write(_SUBMITTED.format(sent=sent.format(name=name), resource_id=resource_id, region=region,
                                     operation_id=operation.get("name", "").rsplit("/", 1)[-1]))
        return 0
    client = ctx.client()
    while not operation.get("done"):
        cli._sleep(DEFAULT_WAIT_INTERVAL_SECONDS)
        operation = client.get("/v1/" + operation["name"])
    error = operation.get("error")
    if error:
        raise CliError(str(error.get("message", "the operation failed")), status="OPERATION_FAILED")
    cli._write(f"Operation [{operation['name']}] is done.")
    return 0


def persistent_resources_create(ctx: Context) -> int:
    """Create a resource from --config and --resource-pool-spec flags."""
    args = ctx.args
    try:
        body = build_persistent_resource(
            display_name=args.display_name,
            config=load_config_mapping(args.config, "a PersistentResource mapping (resourcePools, displayName, ...)")
            if args.config else None,
            resource_pool_specs=args.resource_pool_spec, labels=args.labels, network=args.network)
    except SpecError as exc:
        ctx.usage_error(str(exc))
    client = ctx.client()
    operation = client.request("POST", resource_path(client.project, args.region, PERSISTENT_RESOURCES),
                               params={"persistentResourceId": args.persistent_resource_id}, body=body)
    name = f"projects/{client.project}/locations/{args.region}/persistentResources/{args.persistent_resource_id}"
    return _finish(ctx, operation, "PersistentResource [{name}] is submitted successfully.", name)


def _pools_cell(resource: dict[str, Any]) -> str:
    status = {pool.get("id"): pool for pool in resource.get("trainhubStatus", {}).get("resourcePools", [])}
    cells = []
    for pool in resource.get("resourcePools", []):
        provisioned = status.get(pool.get("id"), {}).get("provisionedReplicaCount", pool.get("replicaCount", ""))
        cells.append(f"{pool.get('id')}: {pool.get('usedReplicaCount', '0')}/{provisioned} used")
    return "; ".join(cells)


PERSISTENT_RESOURCE_COLUMNS = (
    ("PERSISTENT_RESOURCE_ID", lambda resource: str(resource.get("name", "")).rsplit("/", 1)[-1]),
    ("DISPLAY_NAME", lambda resource: str(resource.get("displayName", ""))),
    ("STATE", lambda resource: str(resource.get("state", ""))),
    ("POOLS", _pools_cell),
    ("CREATE_TIME", lambda resource: str(resource.get("createTime", ""))),
)


def persistent_resources_list(ctx: Context) -> int:
    """List the region's resources as a table, or raw as JSON / YAML."""
    args = ctx.args
    client = ctx.client()
    path = resource_path(client.project, args.region, PERSISTENT_RESOURCES)
    resources = list(cli._paginate(client, path, PERSISTENT_RESOURCES, {"pageSize": args.page_size or args.limit},
                                   args.limit))
    cli._print_resources(resources, args.format, PERSISTENT_RESOURCE_COLUMNS)
    return 0


def persistent_resources_describe(ctx: Context) -> int:
    """Print one resource."""
    cli._write(cli._render(ctx.client().get(ctx.resource(ctx.args.resource, PERSISTENT_RESOURCES).path()), ctx.args.format))
    return 0


def persistent_resources_update(ctx: Context) -> int:
    """Change the display name, labels or pool sizes the flags give."""
    args = ctx.args
    try:
        mask, body = build_update(display_name=args.display_name, labels=args.labels, resizes=args.resource_pool_spec)
    except SpecError as exc:
        ctx.usage_error(str(exc))
    ref = ctx.resource(ctx.args.resource, PERSISTENT_RESOURCES)
    operation = ctx.client().request("PATCH", ref.path(), params={"updateMask": mask}, body=body)
    return _finish(ctx, operation, "Request to update the PersistentResource [{name}] has been sent.", ref.name)


def persistent_resources_reboot(ctx: Context) -> int:
    """Reboot a resource (its running replicas are lost)."""
    ref = ctx.resource(ctx.args.resource, PERSISTENT_RESOURCES)
    operation = ctx.client().post(ref.path(":reboot"), {})
    return _finish(ctx, operation, "Request to reboot the PersistentResource [{name}] has been sent.", ref.name)


def persistent_resources_delete(ctx: Context) -> int:
    """Delete a resource (its jobs are cancelled)."""
    ref = ctx.resource(ctx.args.resource, PERSISTENT_RESOURCES)
    operation = ctx.client().request("DELETE", ref.path())
    return _finish(ctx, operation, "Request to delete the PersistentResource [{name}] has been sent.", ref.name)


def operations_describe(ctx: Context) -> int:
    """Print one operation."""
    cli._write(cli._render(ctx.client().get(_operation_path(ctx)), ctx.args.format))
    return 0
