"""Node features and ``sbatch -C/--constraint`` as Slurm 22.05 has them. Pure Python.

Nodes carry features (slurm.conf ``NodeName=... Features=a100,ib``, ``scontrol update NodeName=N
AvailableFeatures=a100,ib ActiveFeatures=a100,ib``: the active ones must be a subset of the
available ones). A job's constraint names features its nodes must have: ``a100``, ``a100&ib`` (AND;
``a100,ib`` is the same and slurmctld stores it as ``a100&ib``), ``a100|v100`` (OR), evaluated left
to right as slurmctld's ``build_feature_list`` / ``_match_feature`` do. Syntax errors are slurmctld's
``Invalid feature specification`` (fixtures/22.05/constraint: ``a100&&ib``, ``|a100``, ``(a100``,
``!a100``, ``a100 ib``); an operator at the end is accepted and ignored (``a100&``), and so is an
empty constraint (``--constraint=``: scontrol shows ``Features=``). A constraint over 1024
characters is refused before the job gets an id (job_mgr.c ``_test_job_desc_fields``).

Not supported (refused with the same error): matching OR ``[a|b]``, counts ``a*2`` and parentheses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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


class FeatureError(ValueError):
    """A constraint or feature list slurmctld refuses; ``str()`` is its message."""


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint: ``terms`` in order, each joined to the result so far by its operator
    (``&`` or ``|``; the first term's is ``&``). ``text`` is what slurmctld stores and shows."""

    text: str
    terms: tuple[tuple[str, str], ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for _, name in self.terms)

    def satisfied_by(self, features: Iterable[str]) -> bool:
        """Whether a node with ``features`` (its active features) may run the job, left to right."""
        have = set(features)
        result = True
        for operator, name in self.terms:
            result = (result and name in have) if operator == "&" else (result or name in have)
        return result


def stored_constraint(text: str) -> str:
    """The constraint as slurmctld stores and shows it: a comma is an AND (``a100,ib`` -> ``a100&ib``)."""
    return text.replace(",", "&")


def parse_constraint(text: str) -> Constraint:
    """``--constraint``'s value as slurmctld parses it; raises FeatureError."""
    if len(text) > MAX_CONSTRAINT_LENGTH:
        raise FeatureError(TOO_LONG)
    stored = stored_constraint(text)
    if re.search(r"(^|[&|])[&|]", stored):
        # an operator first or two in a row (a&&b, a|&b): slurmctld's ``feature == NULL`` at an operator
        raise FeatureError(INVALID_FEATURE)
    terms: list[tuple[str, str]] = []
    operator = "&"
    for token in re.split(r"([&|])", stored):
        if token in ("&", "|"):
            operator = token
        elif token:  # an empty token is only the end after a last operator, which slurmctld ignores
            if not _NAME.fullmatch(token):
                raise FeatureError(INVALID_FEATURE)
            terms.append((operator, token))
    return Constraint(stored, tuple(terms))


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
