"""Node features and ``sbatch -C/--constraint`` as Slurm 22.05 has them. Pure Python.

Nodes carry features (slurm.conf ``NodeName=... Features=a100,ib``, ``scontrol update NodeName=N
AvailableFeatures=a100,ib ActiveFeatures=a100,ib``: the active ones must be a subset of the
available ones). A job's constraint names features its nodes must have (sbatch.1, ``--constraint``;
slurmctld's ``build_feature_list`` parses it, node_scheduler.c ``_get_req_features`` places the job):

* ``a100``, ``a100&ib`` (AND; ``a100,ib`` is the same and slurmctld stores it as ``a100&ib``),
  ``a100|v100`` (OR), evaluated left to right on each node, ``(a100|v100)&ib`` with parentheses
  grouping (one level: ``((a))`` is refused). Every node of the job satisfies the expression.
* Matching OR ``[a100|v100]``: all the job's nodes share one of the features. The alternatives are
  tried in the order written and the first that can be placed wins (fixtures/22.05/constraint:
  ``[v100|a100]`` runs on the v100 node although a100 nodes are idle). What surrounds the brackets
  applies to every alternative: ``[a100|v100]&ib`` needs nodes with ``a100&ib`` or with ``v100&ib``.
* Counts ``a100*2``, ``(a100|v100)*2`` and, within brackets, ``[rack1*2&rack2*4]``: that many of the
  job's nodes have the feature; the job's node count is raised to the sum of the counts
  (``-C a100*2`` without ``-N`` gets 2 nodes) and its other nodes may be any of the partition's
  (``-N 3 -C a100*2`` runs on two a100 nodes and a v100 one). A term without a count beside counted
  ones places nothing, and so does a matching OR beside counts (``[a100|v100]&rack1*1`` runs on one
  rack1 node). Counted terms joined by OR (``a100*1|v100*1``) are never satisfied: slurmctld refuses
  them with ``Requested node configuration is not available``.

Syntax errors are slurmctld's ``Invalid feature specification`` (fixtures/22.05/constraint and
constraint-syntax: ``a100&&ib``, ``|a100``, ``(a100``, ``a100|v100)``, ``!a100``, ``a100 ib``,
``[a100&ib]`` (AND inside brackets needs counts), ``[a100*2|v100*2]`` (no counts in a matching OR),
``[[a|b]]``, ``[]``, two bracket groups, ``((a))``, ``a100*``, ``a100*x``, ``a100*0``); an operator
at the end is accepted and ignored (``a100&``), and so is an empty constraint (``--constraint=``:
scontrol shows ``Features=``). A constraint over 1024 characters is refused before the job gets an
id (job_mgr.c ``_test_job_desc_fields``); a count on a bracket group (``[a|b]*2``) is invalid too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["INVALID_FEATURE", "MAX_CONSTRAINT_LENGTH", "NOT_SUBSET", "TOO_LONG", "Constraint", "FeatureError",
           "parse_constraint", "parse_node_features", "stored_constraint"]

INVALID_FEATURE = "Invalid feature specification"
TOO_LONG = "Pathname of a file, directory or other parameter too long"
#: scontrol update NodeName=N ActiveFeatures=... naming a feature not among the available ones.
NOT_SUBSET = "Active features not subset of available features"
MAX_CONSTRAINT_LENGTH = 1024
#: What a feature name may hold: none of the constraint operators, no space, no ``!``.
_NAME = re.compile(r"[A-Za-z0-9_.:+@=/-]+")
_TOKEN = re.compile(r"[&|()\[\]]|\*[^&|()\[\]]*|[^&|()\[\]*]+")

#: A per-node expression: terms in order, each joined to the result so far by its operator (``&`` or
#: ``|``; the first term's is ``&``); a term is a feature name or a parenthesised expression.
Expression = tuple[tuple[str, "str | Expression"], ...]


class FeatureError(ValueError):
    """A constraint or feature list slurmctld refuses; ``str()`` is its message."""


def _holds(expression: Expression, features: frozenset[str] | set[str]) -> bool:
    """Whether a node with ``features`` satisfies ``expression``, left to right (``_match_feature``)."""
    result = True
    for operator, term in expression:
        value = term in features if isinstance(term, str) else _holds(term, features)
        result = (result and value) if operator == "&" else (result or value)
    return result


def _names(expression: Expression) -> set[str]:
    return {name for _, term in expression for name in ((term,) if isinstance(term, str) else _names(term))}


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint. ``text`` is what slurmctld stores and shows. ``alternatives``: per-node
    expressions, one of which every node of the job satisfies (more than one only for a matching OR,
    tried in order). ``counts``: (expression, n) pairs, n nodes of the job satisfying each; when
    there are counts the other nodes are unconstrained. ``counts_joined_by_or``: counted terms joined
    by ``|``, which no placement satisfies."""

    text: str
    alternatives: tuple[Expression, ...]
    counts: tuple[tuple[Expression, int], ...] = ()
    counts_joined_by_or: bool = False

    @property
    def names(self) -> frozenset[str]:
        found: set[str] = set()
        for expression in (*self.alternatives, *(expression for expression, _ in self.counts)):
            found |= _names(expression)
        return frozenset(found)

    def node_count(self, requested: int) -> int:
        """The job's node count: at least the sum of the counts (``-C a100*2`` alone takes 2 nodes)."""
        return max(requested, sum(count for _, count in self.counts))

    def may_use(self, features: Iterable[str]) -> bool:
        """Whether a node with ``features`` (its active features) can be one of the job's nodes."""
        if self.counts:
            return True
        have = frozenset(features)
        return any(_holds(expression, have) for expression in self.alternatives)

    def choose(self, candidates: Sequence[tuple[str, frozenset[str]]], nodes: int,
               required: frozenset[str] = frozenset()) -> list[str] | None:
        """``nodes`` of the ``candidates`` ((name, active features), best first) that satisfy the
        constraint together, every ``required`` one (-w) among them; None when they cannot."""
        if self.counts_joined_by_or:
            return None
        if self.counts:
            return self._choose_counted(candidates, nodes, required)
        for expression in self.alternatives:
            fitting = [name for name, features in candidates if _holds(expression, features)]
            if not required <= set(fitting):
                continue
            chosen = [name for name in fitting if name in required]
            chosen += [name for name in fitting if name not in required][:nodes - len(chosen)]
            if len(chosen) >= nodes:
                return chosen
        return None

    def _choose_counted(self, candidates: Sequence[tuple[str, frozenset[str]]], nodes: int,
                        required: frozenset[str]) -> list[str] | None:
        """Each count's nodes in turn, best first (-w nodes first), then the best of the others."""
        if not required <= {name for name, _ in candidates}:
            return None
        ordered = sorted(candidates, key=lambda candidate: candidate[0] not in required)
        chosen: list[str] = []
        for expression, count in self.counts:
            fitting = [name for name, features in ordered if name not in chosen and _holds(expression, features)]
            if len(fitting) < count:
                return None
            chosen += fitting[:count]
        chosen += [name for name, _ in ordered if name not in chosen][:nodes - len(chosen)]
        return chosen if len(chosen) == nodes and required <= set(chosen) else None


def stored_constraint(text: str) -> str:
    """The constraint as slurmctld stores and shows it: a comma is an AND (``a100,ib`` -> ``a100&ib``)."""
    return text.replace(",", "&")


class _Parser:
    """``build_feature_list``'s grammar over the tokens of a stored constraint."""

    def __init__(self, text: str) -> None:
        self.tokens = _TOKEN.findall(text)
        if "".join(self.tokens) != text:
            raise FeatureError(INVALID_FEATURE)
        self.position = 0
        self.bracket: tuple[str, list[tuple[Expression, int | None]]] | None = None

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.position += 1
        return token

    def count(self) -> int | None:
        """An optional ``*N`` after a term; N is a positive integer."""
        token = self.peek()
        if token is None or not token.startswith("*"):
            return None
        self.take()
        if not token[1:].isdigit() or int(token[1:]) == 0:
            raise FeatureError(INVALID_FEATURE)
        return int(token[1:])

    def term(self, *, in_parens: bool, in_brackets: bool) -> tuple[str | Expression, int | None]:
        """A feature name, ``( expression )`` or (once, at the top) ``[ ... ]``, with its count."""
        token = self.take()
        if token is None or token in "&|)]" or token.startswith("*"):
            raise FeatureError(INVALID_FEATURE)
        if token == "(":
            if in_parens:
                raise FeatureError(INVALID_FEATURE)
            inner = self.sequence(in_parens=True, in_brackets=in_brackets, closing=")")
            return tuple(operator_term for operator_term, _ in inner), self.count()
        if token == "[":
            if in_parens or in_brackets or self.bracket is not None:
                raise FeatureError(INVALID_FEATURE)
            self.bracket = self.bracket_group()
            if (self.peek() or "").startswith("*"):  # ``[a|b]*2``
                raise FeatureError(INVALID_FEATURE)
            return "[]", None
        if not _NAME.fullmatch(token):
            raise FeatureError(INVALID_FEATURE)
        return token, self.count()

    def bracket_group(self) -> tuple[str, list[tuple[Expression, int | None]]]:
        """``[a|b|c]`` (no counts) or ``[a*2&b*4]`` (every term counted)."""
        inner = self.sequence(in_parens=False, in_brackets=True, closing="]")
        operators = {operator for ((operator, _), _) in inner[1:]}
        counted = [count is not None for _, count in inner]
        terms = [((("&", term),) if isinstance(term, str) else term, count) for ((_, term), count) in inner]
        if operators <= {"|"} and not any(counted):
            return "|", terms
        if operators <= {"&"} and all(counted):
            return "&", terms
        raise FeatureError(INVALID_FEATURE)

    def sequence(self, *, in_parens: bool, in_brackets: bool, closing: str | None,
                 ) -> list[tuple[tuple[str, str | Expression], int | None]]:
        """Terms joined by ``&`` / ``|`` up to ``closing`` (or the end); a last operator is ignored."""
        found: list[tuple[tuple[str, str | Expression], int | None]] = []
        operator = "&"
        while True:
            term, count = self.term(in_parens=in_parens, in_brackets=in_brackets)
            found.append(((operator, term), count))
            token = self.take()
            if token == closing:
                return found
            if token not in ("&", "|"):
                raise FeatureError(INVALID_FEATURE)
            operator = token
            if self.peek() == closing:
                if closing is not None:  # ``(a|)``: only the constraint's very end may follow an operator
                    raise FeatureError(INVALID_FEATURE)
                return found


def parse_constraint(text: str) -> Constraint:
    """``--constraint``'s value as slurmctld parses it; raises FeatureError."""
    if len(text) > MAX_CONSTRAINT_LENGTH:
        raise FeatureError(TOO_LONG)
    stored = stored_constraint(text)
    if not stored:
        return Constraint(stored, ((),))
    parser = _Parser(stored)
    top = parser.sequence(in_parens=False, in_brackets=False, closing=None)
    counts = [(((("&", term),) if isinstance(term, str) else term), count)
              for ((_, term), count) in top if count is not None]
    expression: Expression = tuple(operator_term for operator_term, count in top if count is None)
    if parser.bracket is None:
        return Constraint(stored, (expression,), tuple(counts),
                          counts_joined_by_or=bool(counts) and any(operator == "|" for ((operator, _), _) in top[1:]))
    kind, grouped = parser.bracket
    if kind == "&":
        if counts or len(top) > 1:
            raise FeatureError(INVALID_FEATURE)
        return Constraint(stored, ((),), tuple((term, count) for term, count in grouped if count is not None))
    return Constraint(stored, tuple(_substituted(expression, alternative) for alternative, _ in grouped), tuple(counts))


def _substituted(expression: Expression, alternative: Expression) -> Expression:
    """``expression`` with its bracket group (the term ``[]``) replaced by one matching-OR alternative."""
    return tuple((operator, alternative if term == "[]" else term) for operator, term in expression)


def parse_node_features(text: str) -> tuple[str, ...]:
    """A node's ``Features=`` / ``AvailableFeatures=`` / ``ActiveFeatures=`` list (``a100,ib``), in
    the order given, without repeats; empty text is no features."""
    if len(text) > MAX_CONSTRAINT_LENGTH:
        raise FeatureError(f"at most {MAX_CONSTRAINT_LENGTH} characters")
    names: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        if not _NAME.fullmatch(name):
            raise FeatureError(f"Invalid feature name {name!r}: letters, digits and _.:+@=/- only")
        if name not in names:
            names.append(name)
    return tuple(names)
