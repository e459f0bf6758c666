"""Fair-share: usage decay, Fair Tree (the default) and classic fair-share, and the values sshare prints.

Public API (pure Python, no Django)::

    Association(key, account, user=None, parent=None, shares=1, usage=0.0, partition=None, raw_usage=None)
        # one association; ``shares=None`` means FairShare=parent; ``usage`` is the decayed billable
        # TRES-seconds charged to this association ITSELF (a user's jobs) as of the last decay
        # calculation, what every factor is computed from; ``raw_usage`` the same now (runs that
        # ended since charged), printed as RawUsage; None = ``usage``. Accounts' usage is the sum of
        # their subtree, computed here. The root has ``parent=None`` (exactly one).
    compute_fairshare(associations, *, fair_tree=True, dampening_factor=1) -> FairShareResult
    FairShareResult.factor(key) -> float          # the job's fair-share factor (0..1) for its association
    FairShareResult.rows -> list[ShareRow]         # sshare's rows, in sshare's tree order
    ShareRow(key, account, user, partition, depth, raw_shares, norm_shares, raw_usage, norm_usage,
             effective_usage, fairshare, level_fs, is_root)
    decay_factor(half_life_seconds) -> float       # per-second factor: 1 - 0.693 / half-life (1.0 if 0)
    decayed(usage, seconds, half_life_seconds) -> float
    usage_increment(billable, seconds, half_life_seconds, usage_factor=1.0) -> float
    usage_reset_due(period, last_reset, now) -> bool   # PriorityUsageResetPeriod boundaries

Usage (slurm:src/plugins/priority/multifactor/priority_multifactor.c ``_apply_decay``,
``_apply_new_usage``; reference 2.1): every pass, usage *= decay_factor ** seconds_since_last_pass,
and each running job adds ``seconds * decay_factor ** seconds * billable_tres * qos_usage_factor`` to its
association (and, through the subtree sums, every ancestor). PriorityDecayHalfLife=0 disables decay;
PriorityUsageResetPeriod zeroes all usage at DAILY (00:00), WEEKLY (Sunday 00:00), MONTHLY (1st),
QUARTERLY (1 Jan/Apr/Jul/Oct) or YEARLY (1 Jan) boundaries, in the timezone of ``now``.

Fair Tree (fair_tree.shtml; slurm:src/plugins/priority/multifactor/fair_tree.c; reference 2.3):
S = shares / sum of the shares at its level, U = usage / parent usage (0 if the parent has none),
Level FS = S / U (0 if S is 0, infinite if U is 0; a FairShare=parent user is infinite and a
FairShare=parent account gets Slurm's NO_VAL, 4294967294). The tree is walked depth first with
siblings sorted by Level FS, highest first, users before accounts on equal values; each user met
gets ``rank / number_of_user_associations`` and the rank drops by one per user, except that a user
tied with the previous sibling keeps the previous rank, and an account tied with the previous
sibling passes the tie to its first child. The documentation also says tied sibling *accounts*
have their children merged; the code's ``_count_tied_accounts`` stops at the first account, so
that never happens -- trainhub follows the code (reference 2.3 [obs], section 9.6). Two more code
facts are kept: the "previous Level FS" starts at NO_VAL, so a FairShare=parent account sorted
first among its siblings starts tied; and a tie carries through an account without users. Equal
siblings keep their input order (Slurm's qsort order is unspecified there).

Classic (PriorityFlags=NO_FAIR_TREE; classic_fair_share.shtml; reference 2.2): NormShares is the
product down the path of shares / level shares, NormUsage = usage / root usage (at most 1),
EffectvUsage = NormUsage for children of root, else
``NormUsage + (parent EffectvUsage - NormUsage) * shares / level shares``;
F = 2 ** (-(EffectvUsage / NormShares) / FairShareDampeningFactor), 0 when NormShares is 0.
FairShare=parent associations use their parent's NormShares and EffectvUsage, and the children of a
FairShare=parent account count as siblings of its siblings when level shares are summed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "Association",
    "FairShareError",
    "FairShareResult",
    "ShareRow",
    "compute_fairshare",
    "decay_factor",
    "decayed",
    "usage_increment",
    "usage_reset_due",
]

#: Slurm's NO_VAL, the Level FS of a FairShare=parent account (fair_tree.c ``_calc_assoc_fs``).
NO_VAL = 4_294_967_294.0
#: slurmctld uses 0.693 for ln 2 (``_init_decay_vars``).
_LN2 = 0.693


class FairShareError(ValueError):
    """An association tree that is not a tree (no root, two roots, unknown parent, a cycle)."""


@dataclass(frozen=True)
class Association:
    key: str
    account: str
    user: str | None = None
    parent: str | None = None
    shares: int | None = 1
    usage: float = 0.0
    partition: str | None = None
    raw_usage: float | None = None


@dataclass(frozen=True)
class ShareRow:
    """One sshare row. ``raw_shares`` None with ``is_root`` prints blank, None otherwise "parent";
    ``norm_usage``/``fairshare``/``level_fs`` None print blank."""

    key: str
    account: str
    user: str | None
    partition: str | None
    parent_account: str | None
    depth: int
    is_root: bool
    raw_shares: int | None
    norm_shares: float
    raw_usage: float
    norm_usage: float | None
    effective_usage: float
    fairshare: float | None
    level_fs: float | None


@dataclass
class _Node:
    assoc: Association
    children: list[_Node] = field(default_factory=list)
    parent: _Node | None = None
    depth: int = 0
    usage: float = 0.0
    raw_usage: float = 0.0
    level_shares: int = 0
    fs_parent: _Node | None = None
    norm_shares: float = 0.0
    norm_usage: float = 0.0
    effective_usage: float = 0.0
    level_fs: float = 0.0
    fs_factor: float = 0.0

    @property
    def is_user(self) -> bool:
        return self.assoc.user is not None

    @property
    def uses_parent(self) -> bool:
        return self.assoc.shares is None


@dataclass(frozen=True)
class FairShareResult:
    rows: list[ShareRow]
    factors: dict[str, float]

    def factor(self, key: str) -> float:
        """The fair-share factor a job of association ``key`` gets (0 for an unknown association)."""
        return self.factors.get(key, 0.0)


# --- usage --------------------------------------------------------------------------------------

def decay_factor(half_life_seconds: int) -> float:
    """Per-second decay: ``1 - 0.693 / half-life`` (slurmctld's approximation), 1.0 with no half-life."""
    return 1.0 - _LN2 / half_life_seconds if half_life_seconds > 0 else 1.0


def decayed(usage: float, seconds: float, half_life_seconds: int) -> float:
    """Usage after ``seconds`` of decay (floored at the smallest positive double, as Slurm does)."""
    if usage == 0 or seconds <= 0:
        return usage
    return usage * max(decay_factor(half_life_seconds) ** seconds, 2.2250738585072014e-308)


def usage_increment(billable: float, seconds: float, half_life_seconds: int, usage_factor: float = 1.0) -> float:
    """What a running job adds in one pass of ``seconds``: ``seconds * D**seconds * billable * UsageFactor``."""
    if seconds <= 0:
        return 0.0
    return seconds * decay_factor(half_life_seconds) ** seconds * billable * usage_factor


def _period_start(period: str, moment: dt.datetime) -> dt.datetime | None:
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "DAILY":
        return midnight
    if period == "WEEKLY":  # Sunday 00:00
        return midnight - dt.timedelta(days=(midnight.weekday() + 1) % 7)
    if period == "MONTHLY":
        return midnight.replace(day=1)
    if period == "QUARTERLY":
        return midnight.replace(day=1, month=(midnight.month - 1) // 3 * 3 + 1)
    if period == "YEARLY":
        return midnight.replace(day=1, month=1)
    return None


def usage_reset_due(period: str, last_reset: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether a PriorityUsageResetPeriod boundary lies in (last_reset, now]. NONE never resets; NOW
    resets at (re)configuration, which the caller handles (it returns True only without a last reset)."""
    if period == "NONE":
        return False
    if period == "NOW":
        return last_reset is None
    start = _period_start(period, now)
    return start is not None and (last_reset is None or last_reset < start <= now)


# --- the tree -----------------------------------------------------------------------------------

def _build(associations: Iterable[Association]) -> _Node:
    nodes: dict[str, _Node] = {}
    for assoc in associations:
        if assoc.key in nodes:
            raise FairShareError(f"association {assoc.key!r} appears twice")
        nodes[assoc.key] = _Node(assoc)
    roots = [node for node in nodes.values() if node.assoc.parent is None]
    if len(roots) != 1:
        raise FairShareError(f"expected one root association, found {len(roots)}")
    for node in nodes.values():
        if node.assoc.parent is None:
            continue
        parent = nodes.get(node.assoc.parent)
        if parent is None:
            raise FairShareError(f"association {node.assoc.key!r} has unknown parent {node.assoc.parent!r}")
        if parent.is_user:
            raise FairShareError(f"association {node.assoc.key!r} has a user association as parent")
        node.parent = parent
        parent.children.append(node)
    root = roots[0]
    seen = 0
    stack = [root]
    while stack:  # depths, subtree usage (post-order below), and a cycle check
        node = stack.pop()
        seen += 1
        for child in node.children:
            child.depth = node.depth + 1
            stack.append(child)
    if seen != len(nodes):
        raise FairShareError("the association parents form a cycle")
    _sum_usage(root)
    _set_level_shares(root)
    return root


def _sum_usage(root: _Node) -> None:
    order: list[_Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    for node in reversed(order):
        node.usage = node.assoc.usage + sum(child.usage for child in node.children)
        own = node.assoc.usage if node.assoc.raw_usage is None else node.assoc.raw_usage
        node.raw_usage = own + sum(child.raw_usage for child in node.children)


def _level_members(node: _Node) -> list[_Node]:
    """The associations sharing ``node``'s children's level: FairShare=parent accounts are replaced by
    their children (assoc_mgr ``_get_children_level_shares``)."""
    members: list[_Node] = []
    for child in node.children:
        if child.uses_parent and not child.is_user:
            members.extend(_level_members(child))
        else:
            members.append(child)
    return members


def _set_level_shares(node: _Node) -> None:
    """Level shares of ``node``'s children, and their fs_parent (the nearest ancestor not using
    FairShare=parent): assoc_mgr ``_set_children_level_shares``."""
    _assign_level(node, sum(member.assoc.shares or 0 for member in _level_members(node)), node)


def _assign_level(node: _Node, level: int, fs_parent: _Node) -> None:
    for child in node.children:
        child.level_shares = level
        child.fs_parent = fs_parent
        if child.uses_parent and not child.is_user:
            _assign_level(child, level, fs_parent)  # its children sit at this level
        else:
            _set_level_shares(child)


def _norm_usage(node: _Node, root: _Node) -> float:
    return min(node.usage / root.usage, 1.0) if root.usage else 0.0


# --- Fair Tree ----------------------------------------------------------------------------------

def _fair_tree_shares(node: _Node) -> float:
    source = node.fs_parent if node.uses_parent and node.fs_parent else node
    return (source.assoc.shares or 0) / source.level_shares if source.level_shares else 0.0


def _fair_tree_level_fs(node: _Node) -> float:
    parent = node.fs_parent
    node.norm_shares = _fair_tree_shares(node)
    node.effective_usage = node.usage / parent.usage if parent and parent.usage else 0.0
    if node.uses_parent:
        return math.inf if node.is_user else NO_VAL
    if node.norm_shares == 0:
        return 0.0
    return node.norm_shares / node.effective_usage if node.effective_usage else math.inf


def _fair_tree(root: _Node, user_count: int) -> None:
    rank = rnt = user_count

    def visit(siblings: list[_Node], account_tied: bool) -> None:
        nonlocal rank, rnt
        for node in siblings:
            node.level_fs = _fair_tree_level_fs(node)
        ordered = sorted(siblings, key=lambda n: (-n.level_fs, not n.is_user))
        previous = NO_VAL
        for index, node in enumerate(ordered):
            tied = True if index == 0 and account_tied else previous == node.level_fs
            if node.is_user:
                if not tied:
                    rank = rnt
                node.fs_factor = rank / user_count
                rnt -= 1
            else:
                visit(node.children, tied)
            previous = node.level_fs

    root.norm_shares = 1.0
    root.effective_usage = 1.0
    root.level_fs = NO_VAL
    visit(root.children, False)


# --- classic ------------------------------------------------------------------------------------

def _classic(root: _Node, dampening: int) -> None:
    root.norm_shares = 1.0
    root.effective_usage = 1.0
    stack = list(root.children)
    while stack:  # parents before children
        node = stack.pop()
        parent = node.fs_parent or root
        if node.uses_parent:
            node.norm_shares = parent.norm_shares
            node.effective_usage = parent.effective_usage
        else:
            ratio = node.assoc.shares / node.level_shares if node.level_shares else 0.0
            node.norm_shares = parent.norm_shares * ratio
            if node.parent is root:
                node.effective_usage = node.norm_usage
            else:
                node.effective_usage = node.norm_usage + (parent.effective_usage - node.norm_usage) * ratio
        node.fs_factor = _classic_factor(node.effective_usage, node.norm_shares, dampening)
        stack.extend(node.children)
    root.fs_factor = _classic_factor(root.effective_usage, root.norm_shares, dampening)


def _classic_factor(effective_usage: float, norm_shares: float, dampening: int) -> float:
    """``priority_p_calc_fs_factor``: 2 ** (-(UE / S) / d), 0 when S <= 0."""
    if norm_shares <= 0:
        return 0.0
    return 2.0 ** (-(effective_usage / norm_shares) / dampening)


# --- the result ---------------------------------------------------------------------------------

def _sshare_order(root: _Node) -> list[_Node]:
    """Depth-first, users before accounts, then by name (slurmdb_sort_hierarchical_assoc_list), one
    user's partitions in reverse order (urgent before batch, fixtures/22.05/scenario/sshare-l-a-running)."""
    order: list[_Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        children = sorted(sorted(node.children, key=lambda n: n.assoc.partition or "", reverse=True),
                          key=lambda n: (not n.is_user, (n.assoc.user or n.assoc.account).lower()))
        stack.extend(reversed(children))
    return order


def compute_fairshare(associations: Iterable[Association], *, fair_tree: bool = True,
                      dampening_factor: int = 1) -> FairShareResult:
    """Fair-share factors of every association and sshare's rows (see the module doc)."""
    root = _build(associations)
    order = _sshare_order(root)
    for node in order:
        node.norm_usage = _norm_usage(node, root)
    if fair_tree:
        _fair_tree(root, sum(1 for node in order if node.is_user))
    else:
        _classic(root, dampening_factor)
    rows = [ShareRow(
        key=node.assoc.key, account=node.assoc.account, user=node.assoc.user, partition=node.assoc.partition,
        parent_account=node.parent.assoc.account if node.parent else None, depth=node.depth,
        is_root=node is root, raw_shares=None if node is root else node.assoc.shares,
        norm_shares=node.norm_shares, raw_usage=node.raw_usage, norm_usage=node.norm_usage,
        effective_usage=node.effective_usage,
        fairshare=(node.fs_factor if node.is_user else None) if fair_tree else node.fs_factor,
        level_fs=(None if node.uses_parent or node is root else node.level_fs) if fair_tree else None,
    ) for node in order]
    return FairShareResult(rows=rows, factors={node.assoc.key: node.fs_factor for node in order})


def as_last_run(rows: Iterable[ShareRow], last_run: Mapping[str, tuple[float, float | None]]) -> list[ShareRow]:
    """sshare's rows between decay runs: NormShares as the shares are now (slurmctld renormalises
    them as sacctmgr changes them), FairShare and LevelFS as the last run left them (``last_run``:
    association key -> (its fs_factor, its level_fs; None when no run has seen it yet)); an
    association added since shows a blank NormUsage and 0 EffectvUsage, FairShare and LevelFS
    (fixtures/22.05/prio-sacctmgr/sshare-1.txt, after ``modify account physics set fairshare=5`` and
    ``add User Accounts=bio ... alice``)."""
    shown = []
    for row in rows:
        factor, level = last_run.get(row.key, (None, None))
        if row.is_root or factor is None:
            shown.append(row)
        elif level is None:
            shown.append(replace(row, norm_usage=None, effective_usage=0.0,
                                 fairshare=None if row.fairshare is None else 0.0,
                                 level_fs=None if row.level_fs is None else 0.0))
        else:
            shown.append(replace(row, fairshare=None if row.fairshare is None else factor,
                                 level_fs=None if row.level_fs is None else level))
    return shown
