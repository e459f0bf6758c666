import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from redis.exceptions import RedisError

from trainhub.common.redis import RedisNotConfigured, get_redis

from trainhub.agent.client import NODE_CREDENTIAL_PREFIX
from trainhub.catalog.machines import NO_ACCELERATOR, machine_type_get
from trainhub.iam.tokens import token_digest, token_new
from trainhub.inventory import contact
from trainhub.inventory.facts import facts_problem, simulated_gpus
from trainhub.inventory.models import AgentLogCursor, Executor, JoinToken, Node, NodeCredential, NodePool, NodeState
from trainhub.inventory.selectors import NodeRef
from trainhub.scheduling import working_memory
from trainhub.scheduling.pass_requests import request_pass

logger = logging.getLogger(__name__)


@transaction.atomic
def node_pool_ensure(
    *,
    name: str,
    machine_type: str,
    node_count: int,
    accelerator_type: str | None = None,
    accelerator_count: int | None = None,
    location: str = "us-central1",
    executor: str = Executor.SUBPROCESS,
    simulated_runtime_seconds: int = 30,
) -> NodePool:
    """Create or update a pool and grow it to ``node_count`` nodes (idempotent, never shrinks)."""
    machine = machine_type_get(machine_type)
    if machine is None:
        raise ValueError(f"unknown machine type {machine_type!r}")
    if accelerator_type is None:
        accelerator_type, accelerator_count = machine.fixed_gpu or (NO_ACCELERATOR, 0)
    pool, _ = NodePool.objects.update_or_create(
        name=name,
        defaults={
            "machine_type": machine_type,
            "accelerator_type": accelerator_type,
            "accelerator_count": accelerator_count or 0,
            "location": location,
            "executor": executor,
            "simulated_runtime_seconds": simulated_runtime_seconds,
        },
    )
    pool.full_clean()
    existing = pool.nodes.count()
    for index in range(existing, node_count):
        Node.objects.create(pool=pool, name=f"{name}-{index}", hostname=f"{name}-{index}")
    if node_count > existing:
        request_pass()  # new capacity: waiting jobs may fit now, not at the next beat
    return pool


#: state_reason prefixes of the DOWN states a node's own agent clears by reporting a clean node.
HEARTBEAT_EXPIRED = "heartbeat"
STALE_REPLICAS = "stale replicas still running"
CREDENTIAL_REVOKED = "agent credential revoked"
#: A fresh join brings a node DOWN for one of these back UP (an admin's own DOWN stays).
AGENT_DOWN_REASONS = (HEARTBEAT_EXPIRED, STALE_REPLICAS, CREDENTIAL_REVOKED)


@transaction.atomic
def node_heartbeat(*, node_ids: list[int], now: dt.datetime) -> None:
    """The database keeps the last heartbeat (the record); Redis keeps a TTL key per node."""
    Node.objects.filter(pk__in=node_ids).update(last_heartbeat=now)
    transaction.on_commit(lambda: _heartbeat_keys(node_ids, now))
    revived = Node.objects.filter(pk__in=node_ids, state=NodeState.DOWN,
                                  state_reason__startswith=HEARTBEAT_EXPIRED).update(state=NodeState.UP, state_reason="")
    if revived:
        request_pass()


def node_contacts_flush() -> int:
    """Write the long poll's contacts recorded in Redis since the last flush to ``Node.last_heartbeat``
    in one UPDATE (never moving a later heartbeat back); returns the nodes written. Contact only
    refreshes the record: a node DOWN stays DOWN until its agent's heartbeat reports it clean.
    Without Redis nothing is written (the agents then heart-beat through the API instead)."""
    try:
        client = get_redis()
        contacts = contact.contacts_take(client)
    except (RedisError, RedisNotConfigured):
        logger.warning("long-poll contacts not read: Redis did not answer", exc_info=True)
        return 0
    if not contacts:
        return 0
    by_moment: dict[float, list[int]] = {}
    for node_id, moment in contacts.items():
        by_moment.setdefault(moment, []).append(node_id)
    # The long poll records whole seconds: a pass has a handful of distinct moments, one WHEN each.
    later_contact = Case(*(When(Q(pk__in=ids) & (Q(last_heartbeat__isnull=True) | Q(last_heartbeat__lt=at)),
                                then=Value(at))
                           for at, ids in ((dt.datetime.fromtimestamp(moment, dt.UTC), ids)
                                           for moment, ids in sorted(by_moment.items()))),
                         default=F("last_heartbeat"))
    try:
        return Node.objects.filter(pk__in=list(contacts)).update(last_heartbeat=later_contact)
    except Exception:
        contact.contacts_restore(client, contacts)
        raise


def node_agent_report(*, node: NodeRef, now: dt.datetime, running: list[int], facts: dict | None = None
                      ) -> tuple[str, str]:
    """A node's agent heart-beats, with the replicas it sees running and, at start, its facts;
    returns the node's state and reason.

    Fencing: a node whose agent still runs a replica the control plane no longer lists as active
    there (left over from before a restart or a lost node) goes DOWN, so nothing new is placed on it
    until its agent reports it clean; its agent kills such replicas before it starts anything.
    The common beat - an UP node, no facts, nothing stale - is one UPDATE.
    """
    from trainhub.jobs.models import Replica

    if facts is None and node.state == NodeState.UP:
        listed = set(Replica.objects.filter(node_id=node.pk, active=True).values_list("pk", flat=True)) \
            if running else set()
        if set(running) <= listed:
            Node.objects.filter(pk=node.pk).update(last_heartbeat=now)
            transaction.on_commit(lambda: _heartbeat_keys([node.pk], now))
            return node.state, node.state_reason
    return _node_report_in_full(node_pk=node.pk, now=now, running=running, facts=facts)


@transaction.atomic
def _node_report_in_full(*, node_pk: int, now: dt.datetime, running: list[int], facts: dict | None
                         ) -> tuple[str, str]:
    from trainhub.jobs.models import Replica

    node = Node.objects.select_for_update().select_related("pool").get(pk=node_pk)
    listed = set(Replica.objects.filter(node=node, active=True).values_list("pk", flat=True))
    stale = sorted(set(running) - listed)
    fields = ["last_heartbeat"]
    node.last_heartbeat = now
    if facts is not None:
        node.facts, node.address = _recorded_facts(node.pool, facts), str(facts.get("address") or node.address)
        node.hostname = str(facts.get("hostname") or node.hostname)[:253]
        fields += ["facts", "address", "hostname"]
    was = node.state
    if stale:
        node.state, node.state_reason = NodeState.DOWN, f"{STALE_REPLICAS} (replica ids {', '.join(map(str, stale))})"
    elif node.state == NodeState.DOWN and node.state_reason.startswith((HEARTBEAT_EXPIRED, STALE_REPLICAS)):
        node.state, node.state_reason = NodeState.UP, ""
    if node.state != was or stale:
        fields += ["state", "state_reason"]
    node.save(update_fields=fields)
    transaction.on_commit(lambda: _heartbeat_keys([node.pk], now))
    if node.state != was:
        request_pass()
    return node.state, node.state_reason


#: The latest BootTime kept (9999-12-31T23:59:59 UTC): scontrol show node prints it as a date.
_LAST_BOOT_TIME = 253_402_300_799


def _machine_fact(key: str, value: object) -> bool:
    """Whether an agent's ``arch``, ``os`` or ``bootTime`` is one scontrol show node can print
    (trainhub.slurm.scontrol_node): a line of text of at most 255 characters, or seconds since the
    epoch that make a date; another is dropped, and the node shows the defaults, not a broken page."""
    if key == "bootTime":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _LAST_BOOT_TIME
    return isinstance(value, str) and len(value) <= 255 and value.isprintable()


def _recorded_facts(pool: NodePool, facts: dict) -> dict:
    """What is kept of an agent's facts: a simulated node claims its pool's GPUs; a machine's arch, OS
    and boot time only as _machine_fact allows."""
    kept = {key: facts[key] for key in ("hostname", "address", "cpus", "memoryBytes", "gpus", "agentVersion",
                                        "runtime", "simulated") if key in facts}
    kept.update({key: facts[key] for key in ("arch", "os", "bootTime")
                 if key in facts and _machine_fact(key, facts[key])})
    if kept.get("simulated"):
        kept["gpus"] = simulated_gpus(pool.accelerator_type, pool.accelerator_count)
    return kept


class JoinRefused(Exception):
    """A machine may not join; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


JOIN_TOKEN_PREFIX = "thj_"


@transaction.atomic
def join_token_create(*, pool: NodePool, created_by: str, now: dt.datetime, ttl: dt.timedelta,
                      max_uses: int | None = None, description: str = "") -> tuple[JoinToken, str]:
    """A join token for ``pool``; the raw token is returned once and only its digest is kept."""
    if ttl <= dt.timedelta(0):
        raise ValueError("a join token must expire in the future")
    if max_uses is not None and max_uses < 1:
        raise ValueError("a join token must allow at least one join")
    raw, digest = token_new(JOIN_TOKEN_PREFIX)
    token = JoinToken.objects.create(pool=pool, digest=digest, created_by=created_by[:150], created_at=now,
                                     expires_at=now + ttl, max_uses=max_uses, description=description[:200])
    return token, raw


def join_token_revoke(*, token: JoinToken, now: dt.datetime) -> None:
    JoinToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)


@transaction.atomic
def node_join(*, raw_token: str, name: str, facts: dict, now: dt.datetime, credential: str = "") -> tuple[Node, str]:
    """Trade a join token for a node credential (returned raw, once).

    The machine becomes the pool's node ``name``: a row an admin created and no agent has claimed
    yet, or a new node. A name held by another pool's node, or by a node whose agent still holds a
    live credential, is refused: an admin revokes that credential first (re-imaging a machine).

    An agent may choose its credential itself (``credential``, a ``thn_`` secret it keeps before
    asking). Then a join whose answer was lost is simply asked again: the node already holding that
    very credential answers as the first join did, without spending another use of the token, so
    a network error or a crash between the commit and the answer never leaves a machine locked out.
    """
    token = JoinToken.objects.select_for_update().select_related("pool").filter(digest=token_digest(raw_token)).first()
    if token is not None and credential:
        joined = NodeCredential.objects.select_related("node__pool").filter(
            node__name=name, node__pool=token.pool_id, digest=token_digest(credential), revoked_at__isnull=True).first()
        if joined is not None:
            return joined.node, credential
    if token is None or not token.usable(now):
        raise JoinRefused(401, "The join token is unknown, expired, used up or revoked; ask an admin for a new one "
                               "(Nodes page, or `trainhub nodes join-token create`).")
    pool = token.pool
    problem = facts_problem(facts=facts, machine_type=pool.machine_type, accelerator_type=pool.accelerator_type,
                            accelerator_count=pool.accelerator_count)
    if problem:
        raise JoinRefused(400, f"Node {name!r} cannot join pool {pool.name}: {problem}")
    node = Node.objects.select_for_update().filter(name=name).first()
    if node is not None and node.pool_id != pool.pk:
        raise JoinRefused(409, f"Node name {name!r} belongs to pool {node.pool.name}, not {pool.name}: choose another "
                               "--name or use that pool's join token.")
    if node is not None and NodeCredential.objects.filter(node=node, revoked_at__isnull=True).exists():
        raise JoinRefused(409, f"Node {name!r} has already joined. If this is a new or re-imaged machine, revoke the "
                               "old credential on the Nodes page first.")
    if node is None:
        node = Node.objects.create(pool=pool, name=name, hostname=str(facts.get("hostname") or name)[:253])
    node.facts = _recorded_facts(pool, facts)
    node.address = str(facts.get("address") or "")[:253]
    node.hostname = str(facts.get("hostname") or node.hostname)[:253]
    node.joined_at = now
    node.last_heartbeat = now
    if node.state == NodeState.DOWN and node.state_reason.startswith(AGENT_DOWN_REASONS):
        node.state, node.state_reason = NodeState.UP, ""
    node.save(update_fields=["facts", "address", "hostname", "joined_at", "last_heartbeat", "state", "state_reason"])
    JoinToken.objects.filter(pk=token.pk).update(uses=token.uses + 1)
    if credential:
        raw, digest = credential, token_digest(credential)
        if NodeCredential.objects.filter(digest=digest).exists():
            raise JoinRefused(409, "That credential is already in use: let trainhub-agent choose a new one.")
    else:
        raw, digest = token_new(NODE_CREDENTIAL_PREFIX)
    NodeCredential.objects.create(node=node, digest=digest, created_at=now)
    transaction.on_commit(lambda: _heartbeat_keys([node.pk], now))
    request_pass()
    return node, raw


@transaction.atomic
def node_credential_revoke(*, node: Node, now: dt.datetime) -> int:
    """Cut a node's agent off: its credential stops working at once; the node goes DOWN."""
    revoked = NodeCredential.objects.filter(node=node, revoked_at__isnull=True).update(revoked_at=now)
    if revoked:
        node_set_state(node=node, state=NodeState.DOWN, reason=f"{CREDENTIAL_REVOKED} by an admin")
    return revoked


class NodeBusy(Exception):
    """The node still runs or holds work; the message says what."""


@transaction.atomic
def node_remove(*, node: Node) -> None:
    """Forget a machine: only an idle node with no history that must be kept can go."""
    from trainhub.jobs.models import Replica
    from trainhub.slurm.models import JobNode

    if Replica.objects.filter(node=node, active=True).exists() or node.dedicated_to:
        raise NodeBusy(f"Node {node.name} is running a job or is dedicated to {node.dedicated_to or 'a job'}: "
                       "drain it and wait until it is idle.")
    if JobNode.objects.filter(node=node).exists():
        raise NodeBusy(f"Node {node.name} holds Slurm accounting records; revoke its credential and leave it DOWN.")
    node.delete()
    request_pass()


def _heartbeat_keys(node_ids: list[int], now: dt.datetime) -> None:
    try:
        working_memory.heartbeat(get_redis(), node_ids, now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    except (RedisError, RedisNotConfigured):
        logger.warning("heartbeat keys not written: Redis did not answer", exc_info=True)


@transaction.atomic
def node_set_state(*, node: Node, state: str, reason: str = "") -> Node:
    """An admin's or the heartbeat sweep's change of a node's state (UP, DRAIN, DOWN)."""
    changed = node.state != state
    node.state = state
    node.state_reason = reason
    node.save(update_fields=["state", "state_reason"])
    if changed:
        request_pass()  # a node back UP is capacity; a drained or DOWN one changes what waits for what
    return node


class NodesUnavailable(Exception):
    """The inventory cannot supply the nodes asked for; the message says what is short."""


@transaction.atomic
def nodes_dedicate(*, nodes: list[Node], owner: str) -> list[Node]:
    """Give ``nodes`` exclusively to ``owner``; all or nothing.

    Refused if any node is already dedicated to someone else or still runs a shared replica, so a
    node never serves two masters.
    """
    from trainhub.jobs.models import Replica

    locked = list(Node.objects.select_for_update().filter(pk__in=[n.pk for n in nodes]).order_by("pk"))
    taken = [n.name for n in locked if n.dedicated_to not in ("", owner)]
    if taken:
        raise NodesUnavailable(f"node(s) {', '.join(taken)} are dedicated to something else")
    busy = sorted(Replica.objects.filter(node__in=locked, active=True).values_list("node__name", flat=True))
    if busy:
        raise NodesUnavailable(f"node(s) {', '.join(busy)} are running jobs")
    Node.objects.filter(pk__in=[n.pk for n in locked]).update(dedicated_to=owner)
    for node in locked:
        node.dedicated_to = owner
    return locked


@transaction.atomic
def nodes_release(*, owner: str, nodes: list[Node] | None = None) -> int:
    """Return every node ``owner`` holds (or only those of ``nodes`` it holds) to the shared pool."""
    held = Node.objects.filter(dedicated_to=owner)
    if nodes is not None:
        held = held.filter(pk__in=[node.pk for node in nodes])
    released = held.update(dedicated_to="")
    if released:
        request_pass()  # the shared pool grew
    return released


class LogGap(Exception):
    """A chunk starts past the lines stored so far; ``expected`` is where the agent must resume."""

    def __init__(self, expected: int):
        super().__init__(f"log chunk starts past line {expected}")
        self.expected = expected


def log_chunk_accept(*, key: str, first: int, count: int) -> int:
    """Take lines ``first .. first+count-1`` of a stream; return how many leading ones were stored
    already (a resend after a lost answer). Call inside the transaction that stores the lines."""
    cursor, _ = AgentLogCursor.objects.select_for_update().get_or_create(key=key)
    if first > cursor.received:
        raise LogGap(cursor.received)
    overlap = min(count, cursor.received - first)
    if first + count > cursor.received:
        cursor.received = first + count
        cursor.save(update_fields=["received"])
    return overlap
