"""The CustomJob state machine (Vertex JobState) and replica states. Pure Python.

QUEUED -> PENDING -> RUNNING -> SUCCEEDED | FAILED
QUEUED | PENDING | RUNNING -> CANCELLING -> CANCELLED | SUCCEEDED | FAILED
QUEUED | PENDING -> CANCELLED directly when nothing has started; FAILED from any live state.
Terminal states never change again (cancelling a finished job is a no-op).
"""

QUEUED = "JOB_STATE_QUEUED"
PENDING = "JOB_STATE_PENDING"
RUNNING = "JOB_STATE_RUNNING"
SUCCEEDED = "JOB_STATE_SUCCEEDED"
FAILED = "JOB_STATE_FAILED"
CANCELLING = "JOB_STATE_CANCELLING"
CANCELLED = "JOB_STATE_CANCELLED"

JOB_STATES: dict[int, str] = {
    0: "JOB_STATE_UNSPECIFIED",
    1: QUEUED,
    2: PENDING,
    3: RUNNING,
    4: SUCCEEDED,
    5: FAILED,
    6: CANCELLING,
    7: CANCELLED,
    8: "JOB_STATE_PAUSED",
    9: "JOB_STATE_EXPIRED",
    10: "JOB_STATE_UPDATING",
    11: "JOB_STATE_PARTIALLY_SUCCEEDED",
}

TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
ACTIVE = frozenset({QUEUED, PENDING, RUNNING, CANCELLING})
WAITING = frozenset({QUEUED, PENDING})
#: States a cancel changes: a CANCELLING job already has its cancel (a second one would do nothing).
CANCELLABLE = frozenset({QUEUED, PENDING, RUNNING})

ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    QUEUED: frozenset({PENDING, RUNNING, FAILED, CANCELLING, CANCELLED}),
    PENDING: frozenset({QUEUED, RUNNING, FAILED, CANCELLING, CANCELLED}),
    RUNNING: frozenset({QUEUED, SUCCEEDED, FAILED, CANCELLING}),
    CANCELLING: frozenset({CANCELLED, SUCCEEDED, FAILED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
}


class IllegalTransition(Exception):
    pass


def check_transition(current: str, target: str) -> None:
    if target not in ALLOWED_TRANSITIONS.get(current, frozenset()):
        raise IllegalTransition(f"a job in {current} cannot move to {target}")


# Replica lifecycle: ASSIGNED (allocation written, agent not started yet) -> RUNNING -> EXITED.
REPLICA_ASSIGNED = "ASSIGNED"
REPLICA_RUNNING = "RUNNING"
REPLICA_EXITED = "EXITED"
REPLICA_STATES = [(s, s) for s in (REPLICA_ASSIGNED, REPLICA_RUNNING, REPLICA_EXITED)]
