"""Rendezvous ports per job (pure Python): MASTER_PORT and the CLUSTER_SPEC/TF_CONFIG port.

A job's replicas listen on their nodes' reported addresses. Nodes that report the same address
(several agents on one machine) share its ports, so each job gets a pair of ports (master, master
+ 1) from the configured range that no other active job uses on any address of its nodes; the
pair is held by the job's active replicas and free again once they end.
"""

from __future__ import annotations

from collections.abc import Iterable


def parse_port_range(text: str) -> range:
    """"29500-29999" -> the master ports of the pairs it holds (29500, 29502, ... 29998)."""
    low, _, high = text.partition("-")
    start, end = int(low), int(high or low)
    if not (1 <= start <= end <= 65535) or end - start < 1:
        raise ValueError(f"a port range of at least two ports, as LOW-HIGH, not {text!r}")
    return range(start, end, 2)


def free_master_port(ports: range, used: Iterable[int]) -> int | None:
    """The lowest master port of ``ports`` not in ``used``; None when all are taken."""
    taken = set(used)
    return next((port for port in ports if port not in taken), None)
