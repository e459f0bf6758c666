"""``srun`` inside a batch script: launch one job step across the job's allocation and wait for it.

The node agent puts an ``srun`` first on the batch script's PATH that runs this file (standard
library only, run by path: the node has no Django). It asks the control plane to create the step
(``POST /agent/v1/srun/steps`` with the run's step credential from TRAINHUB_STEP_CREDENTIAL),
then follows it (``GET /agent/v1/srun/steps/N``): every task's lines are printed on srun's own
stdout / stderr - the batch script's, so its output file - prefixed ``N: `` with ``-l``, as Slurm
does; a line for each task that failed as it fails (``srun: error: NODE: task N: Exited with exit
code C``; a stopped one's once the step has ended) and srun exits with the worst task's status (the
highest exit code, or 128 + the highest signal). One SIGINT says how the tasks are; two within a
second, SIGTERM or SIGHUP
(``timeout 60 srun ...``) have the step's tasks stopped on every node (SIGINT after two SIGINT,
else SIGTERM) and srun waits for them (Interrupts). The job ending under the step (scancel) prints
slurmstepd's and srun's lines (srun-details/scancel-8.err). The tasks inherit srun's environment
(own_environment; inside a job it did not make, also srun's default SLURM_DISTRIBUTION, which the
control plane adds). Options: -N/--nodes, -n/--ntasks, --ntasks-per-node, --gres=gpu:K, --exact,
--overlap, -m/--distribution (block, cyclic, plane=N, arbitrary with SLURM_HOSTFILE: read_hostfile), --cpu-bind
(cpu_bind_variables), -l/--label, -v/--verbose (defined_options, launch_lines, completed_lines; -vv adds 22.05's debug lines: propagated_lines, ALLOCATION_THREAD; -vvv its debug2 lines but its IO thread's) (srun.1).

While other steps of the job hold the CPUs or GPUs the step needs, the control plane answers 202
and srun asks again until they are free, printing Slurm 22.05's lines (fixtures/22.05/steps/out-1.txt,
release/out-3.txt): ``srun: Job N step creation temporarily disabled, retrying (Requested nodes are
busy)``, ``... step creation still disabled, retrying (...)`` each time another step of the job ended
and it still does not fit (22.05's srun tries again when a step ends), and, when it starts,
``srun: Step created for job N``. More nodes
than the job has are refused here, as srun does (``srun: error: Only allocated 1 nodes asked for 2``).

``--pty`` (fixtures/22.05/srun-alone/pty-*.txt): task 0 runs on a pseudo-terminal on its node,
of this terminal's size, and only its input and output are srun's (other tasks run, their output
dropped, as srun's --input/--output/--error=0). This terminal goes into raw mode for the step
(restored after), so every key - Ctrl-C, Ctrl-D, Ctrl-Z included - reaches task 0's terminal,
whose own line discipline echoes it and signals the task (``^C`` and the task's SIGINT, as with
Slurm). The relay, over HTTP(S) to the control plane only: a thread reads this terminal (at most
MAX_INPUT_BYTES a read) and POSTs each piece (``:input``, base64), and the new size on SIGWINCH;
the control plane keeps a bounded buffer per step (srun waits while it is full) and wakes the
agent of task 0, which writes the input to the terminal; what the task prints comes back as the
step's ``pty`` chunks, written here byte for byte. Without a terminal on stdin srun says so as
Slurm does (``srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device``, ``srun: error: Not
using a pseudo-terminal, disregarding --pty option``) and runs the step without one.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import resource
import select
import signal
import socket
import ssl
import sys
import termios
import threading
import time
import tty
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping

#: Where srun outside an allocation (trainhub.cli.srun) learns how its job is to end: a path this
#: srun writes ``{"exitCode", "signal", "cancelled", "launchFailed"}`` to once its step ended, as
#: srun.c's fini_srun completes its own job with the tasks' worst status, or cancelled (NO_VAL) after
#: two Ctrl-C; or once its step was refused, as srun_job.c completes it with 1 (launchFailed).
COMPLETION = "TRAINHUB_SRUN_COMPLETION"
#: What srun does not pass on to its tasks: the credential, where it is used, the completion's path.
PRIVATE = ("TRAINHUB_STEP_CREDENTIAL", "TRAINHUB_URL", "TRAINHUB_CA_BUNDLE", COMPLETION)
RETRIES = 5
#: The most bytes of this terminal's input one request carries (the control plane's limit).
MAX_INPUT_BYTES = 2048
#: How often srun asks for its step's output while a terminal's user waits for it (seconds).
TERMINAL_POLL = 0.1
NO_TERMINAL = ("srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device",
               "srun: error: Not using a pseudo-terminal, disregarding --pty option")


#: srun -vv's lines while it makes its own allocation (srun-vv/vv-1.err): trainhub's srun listens on no
#: port (``0``).
ALLOCATION_THREAD = ("srun: debug:  Entering slurm_allocation_msg_thr_create()",
                     "srun: debug:  port from net_stream_listen is 0", "srun: debug:  Entering _msg_thr_internal")
#: srun -vv's lines as it loads the plugins it talks to slurmd with.
PLUGINS = ("srun: debug:  auth/munge: init: Munge authentication plugin loaded",
           "srun: debug:  hash/k12: init: init: KangarooTwelve hash plugin loaded")
#: The resource limits srun passes on to its tasks, in the order srun -vv lists them.
RLIMITS = ("CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS")


class Refused(Exception):
    pass


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="srun", allow_abbrev=False)
    parser.add_argument("-N", "--nodes", type=node_range)
    parser.add_argument("-n", "--ntasks", type=int)
    parser.add_argument("--ntasks-per-node", type=int)
    parser.add_argument("--gres", type=gres_gpus)
    parser.add_argument("--exact", action="store_true")
    parser.add_argument("--overlap", action="store_true")
    parser.add_argument("-m", "--distribution")
    parser.add_argument("--cpu-bind")
    parser.add_argument("-l", "--label", action="store_true")
    parser.add_argument("--pty", action="store_true")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    options.nodes, options.max_nodes = options.nodes or (None, None)
    if options.command and options.command[0] == "--":
        options.command = options.command[1:]
    if not options.command:
        parser.error("No command given to execute.")
    return options


def node_range(text: str) -> tuple[int, int | None]:
    """``-N``: a node count ``N`` (N, None) or a range ``MIN-MAX`` (MIN, MAX). Inside an allocation the
    step runs on MAX of the job's nodes, all of them where it has fewer, MIN at least (22.05's srun
    sends both to slurmctld, which takes as many as it may; fixtures/22.05/srun-range: ``-N 1-2`` in
    a 3-node job runs on 2, ``-N 2-4`` on 3, ``-N 4-5`` is refused, ``Only allocated 3 nodes asked for
    4``)."""
    low, dash, high = text.partition("-")
    if not low.isdigit() or (dash and not high.isdigit()):
        raise argparse.ArgumentTypeError(f"invalid node count: {text!r}")
    return int(low), int(high) if dash else None


#: What may follow -m's node level: the distributions over sockets and cores (srun.1), which move
#: no task to another node.
DISTRIBUTION_LEVELS = ("block", "cyclic", "fcyclic", "*")
BAD_DISTRIBUTION = "srun: error: Invalid --distribution specification"
#: srun's second line for a plane with no size or with levels after it (fixtures/22.05/srun-plane/out-1.txt).
BAD_PLANE = "srun: error: Invalid plane size or size not specified"


def parse_distribution(text: str) -> tuple[str, int]:
    """``-m``/``--distribution``: (its node level, the plane size): ``block``, ``cyclic``,
    ``arbitrary`` (1) or ``plane=N`` (N), the first two optionally followed by the socket and core levels
    (``cyclic:block``). Raises ValueError, with srun's lines, for anything else (``Invalid
    --distribution specification``, fixtures/22.05/srun-dist/out-1.txt; for a plane with no size or
    with levels after it also ``Invalid plane size or size not specified``, srun-plane/out-1.txt)."""
    first, _, rest = text.partition(":")
    if first in ("block", "cyclic") and all(level in DISTRIBUTION_LEVELS for level in rest.split(":") if rest):
        return first, 1
    if text == "arbitrary":
        return text, 1
    kind, _, size = first.partition("=")
    if kind == "plane" and size.isdigit() and int(size) > 0 and not rest:
        return kind, int(size)
    raise ValueError("\n".join([BAD_DISTRIBUTION, BAD_PLANE] if kind == "plane" else [BAD_DISTRIBUTION]))


#: srun's line after slurm_read_hostfile's own when SLURM_HOSTFILE gives no node list
#: (fixtures/22.05/small-diffs/out-1.txt).
HOSTFILE_FAILED = "srun: error: Failure getting NodeNames from hostfile"
#: srun's line where -m arbitrary's node list and -n differ (job_step_create_allocation); the control
#: plane, which expands the file's host lists, says it for a list of another length than -n.
ARBITRARY_COUNT = "You asked for {tasks} tasks but hostlist specified {hosts} nodes"
#: The most entries a step's SLURM_HOSTFILE may give (the control plane takes no more; a ``NAME*K``
#: beyond it is refused before it is written out: 22.05 pushes K names, any K).
MAX_HOSTFILE_ENTRIES = 4096


def _atoi(text: str) -> int:
    """C's atoi: the leading optionally signed digits, 0 without any."""
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    number = digits[:len(digits) - len(digits.lstrip("0123456789"))]
    return sign * int(number) if number else 0


#: slurm_read_hostfile reads SLURM_HOSTFILE with fgets into a buffer of BUFFER_SIZE 1024 (22.05's
#: src/api/allocate.c): at most this many characters at a time, a line longer than that in pieces.
HOSTFILE_CHUNK = 1023


def read_hostfile(path: str, tasks: int | None) -> list[tuple[str, int]]:
    """SLURM_HOSTFILE's entries as 22.05's slurm_read_hostfile reads them for ``-m arbitrary`` with
    ``tasks`` (-n; None: the whole file; fixtures/22.05/small-diffs/out-1.txt): ``#`` starts a comment
    (``\\#`` is a ``#``), a blank line is skipped, a line is entries separated by commas, ``NAME*K`` is
    NAME K times (K read as atoi reads it; ``*0`` leaves the word a name, one no node has), and reading
    stops after the line that brings the count to ``tasks`` (more lines are not read; a line that
    goes past it is kept whole, and -n then differs). An entry counts as one here even where it is a
    host list (``gpu[1-2]``): the control plane expands it (trainhub.slurm.steps.arbitrary_hosts).
    The entries come as runs, (entry, how many times in a row), so that ``gpu4*5000`` or 5,000 names
    ``gpu4`` on a line are one run: 22.05 allocates for them and fails the step (fixtures/22.05/
    srun-range/many-*), which needs their count, not a list of them. The file is read HOSTFILE_CHUNK
    characters at a time, as fgets reads it (_hostfile_lines), so no line, however long, is held
    whole. Raises ValueError with srun's lines: slurm_read_hostfile's (a line not starting with a
    letter or digit, a piece of HOSTFILE_CHUNK characters without a comma, no entry, fewer than
    ``tasks``, a file it cannot open; trainhub's for more than MAX_HOSTFILE_ENTRIES runs, or names
    without ``tasks``: a task a name, more than a step places) and HOSTFILE_FAILED."""
    shown = path if "/" in path else f"./{path}"
    try:
        return _hostfile_entries(shown, tasks)
    except OSError as exc:
        problem = f"slurm_allocate_resources error opening file {shown}, {exc.strerror}"
    except ValueError as exc:
        problem = str(exc)
    raise ValueError(f"srun: error: {problem}\n{HOSTFILE_FAILED}")


def _hostfile_entries(shown: str, tasks: int | None) -> list[tuple[str, int]]:
    """read_hostfile's entries; OSError, or ValueError with slurm_read_hostfile's line."""
    runs: list[tuple[str, int]] = []
    count = 0
    too_many = ValueError(f"Hostfile {shown} gives more than {MAX_HOSTFILE_ENTRIES} names")
    for number, text in _hostfile_lines(shown):
        if not text:
            continue
        if not (text[0].isascii() and text[0].isalnum()):
            raise ValueError(f"Invalid hostfile {shown} contents on line {number}")
        for word in filter(None, text.split(",")):
            name, star, times = word.partition("*")
            repeat = _atoi(times) if star else 0
            entry, repeat = (name, max(repeat, 0)) if repeat else (word, 1)
            if runs and runs[-1][0] == entry:
                runs[-1] = (entry, runs[-1][1] + repeat)
            elif repeat:
                runs.append((entry, repeat))
            count += repeat
            if len(runs) > MAX_HOSTFILE_ENTRIES or (tasks is None and count > MAX_HOSTFILE_ENTRIES):
                raise too_many
        if tasks is not None and count == tasks:
            break
    if not count:
        raise ValueError("Hostlist is empty!")
    if tasks is not None and count < tasks:
        raise ValueError("Too few NodeNames in Slurm Hostfile")
    return runs


def _hostfile_lines(shown: str) -> Iterator[tuple[int, str]]:
    """What slurm_read_hostfile takes from each fgets of HOSTFILE_CHUNK characters, uncommented, with its
    line count then (fixtures/22.05/hostfile-edge): a piece that fills the buffer is cut at its last
    comma, what follows carried to the front of the next piece, and refused without a comma (``Line N,
    of hostfile F too long``, N the lines read before it: 0 for the first); the count goes up only for
    a piece that does not fill it. A comment ends its piece only (``gpu2#`` and 1018 more characters,
    then ``gpu1``: gpu1 is read as a line of its own). A NUL ends a piece as it ends a C string; bytes
    are characters (latin-1), as fgets counts them."""
    carried, number = "", 0
    with open(shown, "rb") as handle:
        while piece := handle.readline(HOSTFILE_CHUNK):
            text = _uncommented(piece.decode("latin-1").split("\0", 1)[0].split("\n", 1)[0])
            head = carried
            if len(text) == HOSTFILE_CHUNK:
                text, comma, carried = text.rpartition(",")
                if not comma:
                    raise ValueError(f"Line {number}, of hostfile {shown} too long")
            else:
                carried, number = "", number + 1
            yield number, head + text


def _uncommented(line: str) -> str:
    """A hostfile line up to its ``#`` (a ``\\#`` is a ``#``)."""
    kept = []
    for char in line:
        if char == "#" and kept and kept[-1] == "\\":
            kept[-1] = "#"
        elif char == "#":
            break
        else:
            kept.append(char)
    return "".join(kept)


def arbitrary_tasks(options: argparse.Namespace,
                    environ: dict[str, str]) -> tuple[int | None, list[tuple[str, int]]]:
    """``-m arbitrary``'s task count (-n; None: one an expanded entry) and SLURM_HOSTFILE's entries
    (read_hostfile's runs). Raises ValueError with srun's lines for a file it cannot read, and without
    SLURM_HOSTFILE (fixtures/22.05/srun-plane/out-1.txt: ``srun -n 3 -m arbitrary`` ``... hostlist
    specified 0 nodes``)."""
    path = environ.get("SLURM_HOSTFILE")
    if not path:
        raise ValueError("srun: error: " + ARBITRARY_COUNT.format(tasks=options.ntasks or 0, hosts=0))
    return options.ntasks, read_hostfile(path, options.ntasks)


def hostfile_alone(options: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """SLURM_HOSTFILE without -m makes the step ``-m arbitrary`` (srun's _opt_verify), its file read
    for -n or, without it, for the job's tasks (SLURM_NTASKS; fixtures/22.05/small-diffs/out-1.txt:
    ``no-m``, two lines for a 3-task job, Too few NodeNames; ``no-m-more`` runs three of four lines,
    SLURM_DISTRIBUTION=arbitrary). -m arbitrary given reads the whole file without -n (``range``)."""
    if options.distribution is not None or not environ.get("SLURM_HOSTFILE"):
        return
    options.distribution = "arbitrary"
    inherited = environ.get("SLURM_NTASKS", "")
    if options.ntasks is None and inherited.isdigit():
        options.ntasks = int(inherited)


#: srun's line for --cpu-bind (or SLURM_CPU_BIND) where the nodes bind no task to CPUs: trainhub's
#: agent does not, as a Slurm cluster with TaskPlugin=task/none (fixtures/22.05/cpu-bind).
NO_CPU_BINDING = "srun: cluster configuration lacks support for cpu binding"
CPU_BIND_HELP = "CPU bind options not supported with current configuration"
#: --cpu-bind's types without a list, by every spelling srun takes (case-insensitive).
_BIND_TYPES = {"no": "none", "none": "none", "rank": "rank", "rank_ldom": "rank_ldom", "socket": "sockets",
               "sockets": "sockets", "core": "cores", "cores": "cores", "thread": "threads", "threads": "threads",
               "ldom": "ldoms", "ldoms": "ldoms"}
#: Types whose record keeps --cpu-bind's whole text as its list (22.05 frees it only for the others).
_BIND_KEEPS_TEXT = ("sockets", "cores", "threads", "ldoms")
_BIND_LISTS = ("map_cpu", "mask_cpu", "map_ldom", "mask_ldom")


def _bind_value(text: str) -> bool:
    """Whether what follows a comma is a value of a map or mask list, not the next option
    (slurm_verify_cpu_bind's _isvalue: a decimal digit, or hex digits up to a comma or the end)."""
    if text[:1].isdigit():
        return True
    rest = text.lstrip("0123456789abcdefABCDEF")
    return rest == "" or rest.startswith(",")


#: The longest ``NAME=VALUE`` (with its NUL) 22.05 puts in an environment (env.c MAX_ENV_STRLEN):
#: a longer one is not set, and srun and each task's slurmstepd say so (unset_lines).
MAX_ENV_STRLEN = 32 * 4096


def too_long(name: str, value: str) -> bool:
    """Whether setenvf refuses NAME=VALUE (``strlen(name) + strlen(value) + 2 >= MAX_ENV_STRLEN``)."""
    return len(name) + len(value) + 2 >= MAX_ENV_STRLEN


def unset_lines(names: list[str], who: str) -> list[str]:
    """``WHO: error:`` lines for variables too long to set, srun's (``srun``) before the launch and
    each task's slurmstepd's (``slurmstepd-NODE``) on its stderr (fixtures/22.05/small-diffs/out-1.txt:
    ``--cpu-bind=map_cpu:0*65526``)."""
    return [line for name in names for line in (f"{who}: error: environment variable {name} is too long",
                                                f"{who}: error: Unable to set {name}")]


#: strtol's bound: a multiplier of this or more is refused (_expand_mult).
LONG_MAX = 2**63 - 1


def _bind_list(kind: str, text: str) -> str | None:
    """A map or mask list with its ``V*N`` repeats written out (_expand_mult) and masks without 0x;
    a multiplier not a number from 1 (below LONG_MAX) refused with srun's line, as 22.05 does
    (small-diffs/out-1.txt: ``Invalid map_cpu multiplier: 0``, for a map's one with other than digits
    ``Failed to validate number: *x, the offending character is x``);
    None where it is longer than any variable may hold (22.05 writes out any N, taking as long as it
    must: srun --cpu-bind=map_cpu:0*2147483647 had launched nothing when killed 20 s later,
    small-diffs/out-1.txt; no variable could hold the list, so trainhub does not write it out)."""
    values, length = [], 0
    for item in text.split(","):
        value, star, count = item.partition("*")
        if kind.startswith("mask") and value[:2].lower() == "0x":
            value = value[2:]
        if star and kind.startswith("map") and not count.isdigit() and count:
            offending = next(char for char in count if not char.isdigit())
            raise ValueError(f"srun: error: Failed to validate number: *{count}, the offending character is {offending}")
        if star and not (count.isdigit() and 0 < int(count) < LONG_MAX):
            raise ValueError(f"srun: error: Invalid {kind} multiplier: {count}")
        repeat = int(count) if star else 1
        length += repeat * (len(value) + 1)
        if length > MAX_ENV_STRLEN:
            return None
        values += [value] * repeat
    return ",".join(values)


def cpu_bind_given(options: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """--cpu-bind, else SLURM_CPU_BIND (srun's input variable), else None."""
    return options.cpu_bind if options.cpu_bind is not None else environ.get("SLURM_CPU_BIND")


def cpu_bind_environment(text: str) -> tuple[dict[str, str], list[str]]:
    """The SLURM_CPU_BIND* variables srun --cpu-bind=TEXT gives each task (cpu_bind_variables) and
    the names of those too long to set, which the tasks do not get (small-diffs/out-1.txt: the
    task of ``map_cpu:0*65522`` sees no SLURM_CPU_BIND, of ``map_cpu:0*65526`` no SLURM_CPU_BIND_LIST
    either), in the order srun names them."""
    variables = cpu_bind_variables(text)
    dropped = sorted(name for name, value in variables.items() if value is None or too_long(name, value))
    return {name: value for name, value in variables.items() if name not in dropped}, dropped


def cpu_bind_variables(text: str) -> dict[str, str | None]:
    """What srun --cpu-bind=TEXT gives each task (slurm:src/common/proc_args.c slurm_verify_cpu_bind,
    the launch's SLURM_CPU_BIND_*; fixtures/22.05/cpu-bind): SLURM_CPU_BIND_VERBOSE (quiet or verbose),
    _TYPE (the last type given: ``cores``, ``none``, ``map_cpu:``, ...), _LIST (a map or mask's
    values; for sockets, cores, threads and ldoms the whole TEXT as given, as 22.05 keeps it) and
    SLURM_CPU_BIND, ``VERBOSE,TYPELIST`` (so ``--cpu-bind=cores`` is ``quiet,corescores``); the last
    two None for a list too long to write out (_bind_list). Raises ValueError with srun's error line
    for a word it does not know or a map or mask without a list."""
    marked = "".join(";" if char == "," and not _bind_value(text[index + 1:]) else char
                     for index, char in enumerate(text))
    verbose, kind, values = "quiet", "", ""
    for token in marked.split(";"):
        word = token.lower()
        name, _, listed = token.partition(":") if ":" in token else token.partition("=")
        if word in ("q", "quiet"):
            verbose = "quiet"
        elif word in ("v", "verbose"):
            verbose = "verbose"
        elif word in _BIND_TYPES:
            kind = _BIND_TYPES[word]
            values = text if kind in _BIND_KEEPS_TEXT else ""
        elif name.lower().replace("_", "") in {key.replace("_", "") for key in _BIND_LISTS}:
            kind = next(key for key in _BIND_LISTS if key.replace("_", "") == name.lower().replace("_", ""))
            if not listed:
                raise ValueError(f'srun: error: missing list for "--cpu-bind={kind}:<list>"')
            values = _bind_list(kind, listed)
            kind += ":"
        else:
            raise ValueError(f'srun: error: unrecognized --cpu-bind argument "{token}"')
    return {"SLURM_CPU_BIND_VERBOSE": verbose, "SLURM_CPU_BIND_TYPE": kind, "SLURM_CPU_BIND_LIST": values,
            "SLURM_CPU_BIND": None if values is None else f"{verbose},{kind}{values}"}


def nodes_within_tasks(options: argparse.Namespace, environ: Mapping[str, str] | None = None) -> str | None:
    """A step's -N above its -n is lowered to it, every node running a task, as sbatch lowers a
    job's (trainhub.slurm.sbatch.nodes_within_tasks; fixtures/22.05/tasks-nodes/salloc-7.err): srun's
    warning line, or None. Without -N srun takes SLURM_NNODES from ``environ`` (the job's node count
    in a batch script) and says the same (fixtures/22.05/small-diffs/out-1.txt: ``srun -n 1`` in a
    3-node job, ``can't run 1 processes on 3 nodes``); the step is sent no -N then. A range's MIN is
    the count said (fixtures/22.05/srun-range/batch-N2-3-n1.err: ``-N 2-3 -n 1``, ``on 2 nodes``), its
    MAX is lowered to -n silently."""
    inherited = (environ or {}).get("SLURM_NNODES", "")
    nodes = options.nodes if options.nodes is not None else int(inherited) if inherited.isdigit() else None
    if options.ntasks is not None and options.max_nodes is not None:
        options.max_nodes = min(options.max_nodes, options.ntasks)
    if nodes is None or options.ntasks is None or options.ntasks >= nodes:
        return None
    warning = f"srun: Warning: can't run {options.ntasks} processes on {nodes} nodes, setting nnodes to {options.ntasks}"
    if options.nodes is not None:
        options.nodes, options.max_nodes = options.ntasks, None
    return warning


def gres_gpus(text: str) -> int:
    """``gpu:K``, ``gpu:TYPE:K``, ``gpu`` (one) -> K; ``none`` -> 0."""
    if text == "none":
        return 0
    parts = text.split(":")
    if parts[0] != "gpu" or len(parts) > 3 or (len(parts) > 1 and not parts[-1].isdigit()):
        raise argparse.ArgumentTypeError(f"Invalid generic resource (gres) specification: {text}")
    return int(parts[-1]) if len(parts) > 1 else 1


class Client:
    def __init__(self, url: str, credential: str, ca_bundle: str | None):
        self.url = url.rstrip("/")
        self.credential = credential
        self.context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.credential}", "Content-Type": "application/json",
            "Accept": "application/json"})
        delay = 0.2
        for attempt in range(RETRIES + 1):
            try:
                with urllib.request.urlopen(request, timeout=30, context=self.context) as answer:  # noqa: S310
                    return json.loads(answer.read() or b"{}")
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    try:
                        message = json.loads(exc.read())["error"]["message"]
                    except (ValueError, KeyError, TypeError):
                        message = f"HTTP {exc.code}"
                    raise Refused(message) from None
                problem = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                problem = str(exc)
            if attempt == RETRIES:
                raise Refused(f"the control plane cannot be reached: {problem}")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")


def _ranges(numbers: list[int]) -> str:
    """``1-2,5`` for 1, 2, 5."""
    parts, start = [], None
    for index, number in enumerate(numbers):
        if start is None:
            start = number
        if index + 1 == len(numbers) or numbers[index + 1] != number + 1:
            parts.append(str(start) if start == number else f"{start}-{number}")
            start = None
    return ",".join(parts)


def task_messages(failed: list[list]) -> list[str]:
    """srun's lines for the tasks that failed ([task, node, code, signal]), one per node and exit:
    ``srun: error: NODE: task N: Exited with exit code C``, ``tasks 1-2: ...`` for several
    (slurm:src/srun/launch.c, fixtures/22.05/srun-alone/pty-12.txt)."""
    groups: dict[tuple[str, int, int], list[int]] = {}
    for task, node, code, signum in sorted(failed):
        groups.setdefault((node, code, signum), []).append(task)
    lines = []
    for (node, code, signum), tasks in groups.items():
        who = f"task {tasks[0]}" if len(tasks) == 1 else f"tasks {_ranges(tasks)}"
        if signum:
            try:
                what = signal.strsignal(signum) or f"Signal {signum}"
            except ValueError:
                what = f"Signal {signum}"
        else:
            what = f"Exited with exit code {code}"
        lines.append(f"srun: error: {node}: {who}: {what}")
    return lines


#: Signals srun received (SIGINT, SIGTERM, SIGHUP) and when (time.monotonic()), see Interrupts.
_interrupted: list[tuple[int, float]] = []


def _interrupt(signum: int, frame) -> None:
    _interrupted.append((signum, time.monotonic()))


def _say(*lines: str) -> None:
    for line in lines:
        print(line, file=sys.stderr, flush=True)


class Interrupts:
    """What srun does with the signals it gets while its step runs (fixtures/22.05/srun-details/int-*):
    a SIGINT more than a second after the last one says how the tasks are (``srun: interrupt (one more
    within 1 sec to abort)``, ``srun: StepId=J.S tasks 0-1: running``) and goes on; a second within
    the second aborts the step: ``srun: sending Ctrl-C to StepId=J.S`` (the tasks get SIGINT),
    ``srun: forcing job termination``, ``srun: Job step aborted: Waiting up to K seconds for job step
    to finish.`` (KillWait + 2); SIGTERM or SIGHUP stops the tasks (SIGTERM), ``srun: forcing job
    termination``. After the two SIGINT the tasks a signal killed get no error line (int-7); after
    SIGTERM they do (srun/out-2.txt: ``srun: error: gpu1: task 0: Terminated``)."""

    def __init__(self, client: Client, step: dict):
        self.client = client
        self.step = step
        self.handled = 0
        self.last_interrupt: float | None = None
        self.aborted = False
        #: Aborted by two SIGINT: the tasks the SIGINT killed are not reported, and srun's own
        #: allocation ends cancelled (srun.c's SRUN_JOB_CANCELLED: slurm_complete_job with NO_VAL).
        self.ctrl_c_aborted = False

    def _status(self) -> str:
        tasks = self.step["numTasks"]
        who = "task 0" if tasks == 1 else f"tasks {_ranges(list(range(tasks)))}"
        return f"srun: StepId={self.step['jobId']}.{self.step['stepId']} {who}: running"

    def _cancel(self, signum: int) -> None:
        self.client.call("POST", f"/agent/v1/srun/steps/{self.step['stepId']}:cancel",
                         {"time": time.time(), "signal": signum})
        self.aborted = True

    def handle(self) -> None:
        while self.handled < len(_interrupted):
            signum, moment = _interrupted[self.handled]
            self.handled += 1
            if self.aborted:
                continue
            if signum == signal.SIGINT and (self.last_interrupt is None or moment - self.last_interrupt > 1):
                self.last_interrupt = moment
                _say("srun: interrupt (one more within 1 sec to abort)", self._status())
            elif signum == signal.SIGINT:
                _say(f"srun: sending Ctrl-C to StepId={self.step['jobId']}.{self.step['stepId']}")
                self._cancel(signal.SIGINT)
                self.ctrl_c_aborted = True
                _say("srun: forcing job termination", "srun: Job step aborted: Waiting up to "
                     f"{self.step.get('killWait', 30) + 2} seconds for job step to finish.")
            else:
                _say("srun: forcing job termination")
                self._cancel(signal.SIGTERM)


def window_size(fd: int) -> dict[str, int] | None:
    """The terminal's size on ``fd``; None when it is no terminal."""
    try:
        columns, lines = os.get_terminal_size(fd)
    except OSError:
        return None
    return {"rows": lines, "cols": columns}


class Terminal:
    """This terminal in raw mode while task 0's terminal is relayed (see the module's docstring)."""

    def __init__(self, client: Client, step_id: int, fd: int = 0):
        self.client = client
        self.path = f"/agent/v1/srun/steps/{step_id}:input"
        self.fd = fd
        self.wake_read, self.wake_write = os.pipe()
        self.stopping = False
        self.resized = False
        self.thread = threading.Thread(target=self._relay, daemon=True)

    def __enter__(self) -> Terminal:
        self.saved = termios.tcgetattr(self.fd)
        tty.setraw(self.fd)
        self.previous = signal.signal(signal.SIGWINCH, self._resize)
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stopping = True
        os.write(self.wake_write, b"x")
        self.thread.join(timeout=5)
        signal.signal(signal.SIGWINCH, self.previous)
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        os.close(self.wake_read)
        os.close(self.wake_write)

    def _resize(self, signum, frame) -> None:
        self.resized = True
        os.write(self.wake_write, b"x")

    def _send(self, body: dict) -> bool:
        """Send one input, waiting while the control plane's buffer is full; False once srun stops."""
        delay = 0.05
        while not self.stopping:
            if self.client.call("POST", self.path, body).get("accepted", True):
                return True
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        return False

    def _relay(self) -> None:
        try:
            while not self.stopping:
                ready, _, _ = select.select([self.fd, self.wake_read], [], [])
                if self.wake_read in ready:
                    os.read(self.wake_read, 64)
                    if self.resized:
                        self.resized = False
                        size = window_size(self.fd)
                        if size and not self._send(size):
                            return
                if self.fd in ready and not self.stopping:
                    typed = os.read(self.fd, MAX_INPUT_BYTES)
                    if not typed or not self._send({"data": base64.b64encode(typed).decode()}):
                        return
        except Refused:
            return  # the step has ended: nothing reads the input any more


def follow(client: Client, step_id: int, *, label: bool, num_tasks: int, poll: float = 0.2,
           terminal: bool = False, interrupts: Interrupts | None = None, patience: float = 32.0,
           nodes: Mapping[int, str] | None = None) -> dict:
    """Print the step's output until it has ended; its last answer, with ``said``: the tasks whose
    failure srun printed as it read it (the control plane's ``exit`` lines, after the task's own: a
    task's ``srun: error: NODE: task N: Exited with exit code C`` as it exits, fixtures/22.05/
    srun-range/out-3.txt; ``nodes``: each task's node; exits read together, as slurmstepd's one
    message, share a line per node and exit: task_messages). Interrupted (``interrupts``), srun says
    so, or has the step's tasks stopped on every node and still waits for them (their exits come in
    the last answer's ``failed``). ``terminal`` (--pty): task 0's terminal output, byte for byte, and
    nothing of the other tasks, the failures said after it. A step that ended under its tasks (the
    job was cancelled) is followed until every node reported them stopped, at most ``patience``
    seconds (KillWait + 2, as srun waits)."""
    max_poll = TERMINAL_POLL if terminal else 1.0
    poll = min(poll, max_poll)
    width = len(str(max(num_tasks - 1, 0)))
    after = 0
    ended_at = None
    said: list[int] = []
    while True:
        if interrupts is not None:
            interrupts.handle()
        answer = client.call("GET", f"/agent/v1/srun/steps/{step_id}?after={after}")
        exited: list[list] = []
        for task, stream, text in [*answer["lines"], (None, "", "")]:
            if exited and stream != "exit":  # the exits read together, before what follows them
                sys.stdout.flush()
                _say(*task_messages(exited))
                said += [item[0] for item in exited]
                exited = []
            if stream == "exit" and terminal:  # said once the terminal is itself again (raw now: no \r)
                continue
            if stream == "exit":
                code, signum = (int(number) for number in text.split())
                exited.append([task, (nodes or {}).get(task, "?"), code, signum])
                continue
            if task is None or (terminal and task != 0):
                continue
            if stream == "pty":
                sys.stdout.buffer.write(base64.b64decode(text))
                continue
            out = sys.stdout if stream == "stdout" else sys.stderr
            # Both are often the job's one output file: each line is written out before one of the
            # other stream, so the file keeps the order the control plane gave.
            (sys.stderr if out is sys.stdout else sys.stdout).flush()
            out.write(f"{task:>{width}}: {text}\n" if label else f"{text}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        moved = answer["next"] != after
        after = answer["next"]
        if answer["state"] != "RUNNING" and not moved:
            ended_at = time.monotonic() if ended_at is None else ended_at
            if not answer.get("pendingNodes"):
                return {**answer, "said": said}
            if time.monotonic() - ended_at > patience:
                _say("srun: error: Timed out waiting for job step to complete")
                return {**answer, "said": said}
        if not moved:
            time.sleep(poll)
            poll = min(poll * 1.5, max_poll)


def create(client: Client, body: dict, *, poll: float = 0.2, max_poll: float = 1.0) -> dict | None:
    """Create the step, asking again while the control plane says it must wait; None when srun
    was interrupted while it waited (no step was created)."""
    ended = None
    while True:
        answer = client.call("POST", "/agent/v1/srun/steps", {**body, "time": time.time()})
        if not answer.get("retry"):
            if ended is not None:
                print(f"srun: Step created for job {answer['jobId']}", file=sys.stderr, flush=True)
            return answer
        if _interrupted:
            return None
        if ended is None or answer.get("stepsEnded", ended) != ended:
            how = "temporarily" if ended is None else "still"
            print(f"srun: Job {answer['jobId']} step creation {how} disabled, retrying ({answer['reason']})",
                  file=sys.stderr, flush=True)
            ended = answer.get("stepsEnded", 0)
        time.sleep(poll)
        poll = min(poll * 1.5, max_poll)


def own_environment(options: argparse.Namespace, environ: dict[str, str]) -> dict[str, str]:
    """What srun passes on to its tasks: its environment but the credential, and what srun adds
    (fixtures/22.05/srun-details/env-*.txt): SLURM_UMASK (its umask, unless set already: sbatch sets it
    for the batch script), SLURM_PRIO_PROCESS (its scheduling priority), given --ntasks-per-node,
    SLURM_NTASKS_PER_NODE and, given -m, SLURM_DISTRIBUTION as given, ``plane`` for ``plane=N``
    (fixtures/22.05/srun-dist/out-1.txt) with N in SLURM_DIST_PLANESIZE (srun-plane/out-1.txt,
    srun-alone-plane.txt)."""
    env = {name: value for name, value in environ.items() if name not in PRIVATE}
    if "SLURM_UMASK" not in env:
        mask = os.umask(0)
        os.umask(mask)
        env["SLURM_UMASK"] = f"{mask:04o}"
    env["SLURM_PRIO_PROCESS"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    if options.ntasks_per_node is not None:
        env["SLURM_NTASKS_PER_NODE"] = str(options.ntasks_per_node)
    if options.distribution is not None:
        kind, plane_size = parse_distribution(options.distribution)
        env["SLURM_DISTRIBUTION"] = options.distribution if kind != "plane" else kind
        if kind == "plane":
            env["SLURM_DIST_PLANESIZE"] = str(plane_size)
    cpu_bind = cpu_bind_given(options, environ)
    if cpu_bind is not None:
        env.update(cpu_bind_environment(cpu_bind)[0])
    return env


def defined_options(values: list[tuple[str, str]]) -> list[str]:
    """srun -v's first lines: its options by name and value, between two rules
    (fixtures/22.05/srun-details/verbose-4.err, srun-vv/salloc-3.err)."""
    rule = "srun: -------------------- --------------------"
    return ["srun: defined options", rule, *(f"srun: {name:<20}: {value}" for name, value in values), rule,
            "srun: end of defined options"]


def allocation_options(options: argparse.Namespace, environ: dict[str, str]) -> list[tuple[str, str]]:
    """srun -v's options inside an allocation (srun-vv/salloc-3.err): what it takes from the
    allocation's variables first (its node list under the name ``(null)``, as Slurm 22.05 prints
    it, its job id and name), then those given (a flag's value is ``set``)."""
    nodes = options.nodes if options.max_nodes is None else f"{options.nodes}-{options.max_nodes}"
    given = {"nodes": nodes, "ntasks": options.ntasks, "ntasks-per-node": options.ntasks_per_node,
             "distribution": options.distribution,
             "gres": None if options.gres is None else f"gpu:{options.gres}", "exact": options.exact or None,
             "overlap": options.overlap or None, "label": options.label or None, "pty": options.pty or None,
             "verbose": options.verbose}
    inherited = [("(null)", environ.get("SLURM_JOB_NODELIST")), ("jobid", environ.get("SLURM_JOB_ID")),
                 ("job-name", environ.get("SLURM_JOB_NAME"))]
    return [(name, value) for name, value in inherited if value] + [
        (name, "set" if value is True else str(value)) for name, value in sorted(given.items()) if value]


def propagated_lines(env: dict[str, str]) -> list[str]:
    """srun -vv's lines for what it passes on to its tasks: its resource limits (the soft ones,
    unlimited as 2**64 - 1), scheduling priority and umask (``env``: own_environment's;
    srun-vv/vv-1.err)."""
    lines = []
    for name in RLIMITS:
        soft, _ = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))
        lines.append(f"srun: debug:  propagating RLIMIT_{name}={2 ** 64 - 1 if soft == resource.RLIM_INFINITY else soft}")
    return lines + [f"srun: debug:  propagating SLURM_PRIO_PROCESS={env['SLURM_PRIO_PROCESS']}",
                    f"srun: debug:  propagating UMASK={env['SLURM_UMASK']}"]


def _numbers(numbers: list[int]) -> str:
    """Task ids as Slurm's ranged hostlist prints them: ``0``, ``[0-1]``, ``[0-1,4]``."""
    text = _ranges(numbers)
    return text if len(numbers) == 1 else f"[{text}]"


def _cpu_counts(text: str) -> str:
    """SLURM_JOB_CPUS_PER_NODE (``2(x2),1``) as srun -v prints its counts (``2(x2),1(x1)``)."""
    return ",".join(item if "(x" in item else f"{item}(x1)" for item in text.split(",") if item)


def launch_lines(step: dict, environ: dict[str, str], *, command: str, debug: bool = False,
                 debug2: bool = False) -> list[str]:
    """srun -v's lines once its step is created (fixtures/22.05/srun-details/verbose-4.err); ``debug``
    (-vv): 22.05's debug lines among them (srun-vv/vv-1.err; trainhub's srun listens on no port:
    ``0``, its IO thread is its main thread); ``debug2`` (-vvv): its debug2 lines but its IO thread's,
    which has none here (srun-vv/vvv-2.err: the step's tasks and CPUs per task, the launch's replies,
    each node's launch message)."""
    name = f"StepId={step['jobId']}.{step['stepId']}"
    nodes = len(step["layout"])
    lines = [f"srun: jobid {step['jobId']}: nodes({environ.get('SLURM_JOB_NUM_NODES', '')}):"
             f"`{environ.get('SLURM_JOB_NODELIST', '')}', cpu counts: "
             f"{_cpu_counts(environ.get('SLURM_JOB_CPUS_PER_NODE', ''))}"]
    if debug2:
        lines += [f"srun: debug2: creating job with {step['numTasks']} tasks",
                  f"srun: debug2: cpu:{environ.get('SLURM_CPUS_PER_TASK', '1')} is not a gres"]
    if debug:
        cpus = step["numTasks"] * int(environ.get("SLURM_CPUS_PER_TASK", "1"))
        lines += [f"srun: debug:  requesting job {step['jobId']}, user {os.getuid()}, nodes {len(step['layout'])} "
                  "including ((null))",
                  f"srun: debug:  cpus {cpus}, tasks {step['numTasks']}, name {os.path.basename(command)}, "
                  "relative 65534"]
    lines.append("srun: launch/slurm: launch_p_step_launch: CpuBindType=(null type)")
    if debug:
        lines += ["srun: debug:  Entering slurm_step_launch", "srun: debug:  mpi/none: mpi_p_client_prelaunch: "
                  "Using mpi/none", "srun: debug:  Entering _msg_thr_create()",
                  "srun: debug:  initialized stdio listening socket, port 0",
                  f"srun: debug:  Started IO server thread ({threading.get_ident()})", "srun: debug:  Entering _launch_tasks"]
    lines += [f"srun: launching {name} on host {node}, {len(tasks)} tasks: {_numbers(tasks)}"
              for node, tasks in step["layout"]]
    lines.append("srun: route/default: init: route default plugin loaded")
    if debug2:
        lines += [f"srun: debug2: Tree head got back 0 looking for {nodes}",
                  *(f"srun: debug2: Tree head got back {count}" for count in range(1, nodes + 1))]
    if debug:
        lines += ["srun: debug:  launch returned msg_rc=0 err=0 type=8001"] * nodes
    for node, tasks in step["layout"]:
        lines += [*(["srun: debug2: received task launch"] if debug2 else []),
                  f"srun: launch/slurm: _task_start: Node {node}, {len(tasks)} tasks started"]
    return lines


def completed_lines(step: dict, failed: list[list], *, debug2: bool = False) -> list[str]:
    """srun -v's lines for each node's tasks that exited 0, once the step ended; -vvv (``debug2``):
    each after its message's ``received task exit`` (srun-vv/vvv-2.err)."""
    name = f"StepId={step['jobId']}.{step['stepId']}"
    lines = []
    for node, tasks in step["layout"]:
        done = [task for task in tasks if task not in {item[0] for item in failed}]
        if done:
            who = f"task {done[0]}" if len(done) == 1 else f"tasks {_ranges(done)}"
            lines += [*(["srun: debug2: received task exit"] if debug2 else []),
                      f"srun: launch/slurm: _task_finish: Received task exit notification for {len(done)} task"
                      f"{'s' if len(done) > 1 else ''} of {name} (status=0x0000).",
                      f"srun: launch/slurm: _task_finish: {node}: {who}: Completed"]
    return lines


def stepd_unset_lines(step: dict, names: list[str], *, label: bool) -> list[str]:
    """Each task's slurmstepd's unset_lines, on that task's stderr (labelled as its output with -l), in
    task order: the nodes could not set the variables srun could not (small-diffs/out-1.txt)."""
    width = len(str(max(step["numTasks"] - 1, 0)))
    placed = sorted((task, node) for node, tasks in step["layout"] for task in tasks)
    return [f"{task:>{width}}: {line}" if label else line
            for task, node in placed for line in unset_lines(names, f"slurmstepd-{node}")]


def finished_lines(step: dict, *, alone: bool, debug2: bool = False) -> list[str]:
    """srun -vv's last lines, once its tasks' exits are said: each task done, its IO thread's end and,
    for srun that made its own allocation (``alone``), its allocation thread's (srun-vv/vv-1.err),
    which -vvv (``debug2``) says it clears up first (vvv-2.err)."""
    tasks = [task for _, numbers in step["layout"] for task in numbers]
    clearing = ["srun: debug2: slurm_allocation_msg_thr_destroy: clearing up message thread"] if debug2 else []
    return ([f"srun: debug:  task {task} done" for task in sorted(tasks)] + ["srun: debug:  IO thread exiting"]
            + ([*clearing, "srun: debug:  Leaving _msg_thr_internal"] if alone else []))


def main(argv: list[str]) -> int:
    options = parse(argv)
    credential = os.environ.get("TRAINHUB_STEP_CREDENTIAL")
    url = os.environ.get("TRAINHUB_URL")
    if not credential or not url:
        print("srun: error: no job step credential: srun runs inside a batch script of a trainhub Slurm job",
              file=sys.stderr)
        return 1
    if options.distribution is not None:
        try:
            parse_distribution(options.distribution)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 255
    hostfile_alone(options, os.environ)
    tasks, hosts = options.ntasks, None
    if options.distribution == "arbitrary":
        try:
            tasks, hosts = arbitrary_tasks(options, dict(os.environ))
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 1
    cpu_bind = cpu_bind_given(options, os.environ)
    if cpu_bind is not None and cpu_bind.lower() == "help":
        print(CPU_BIND_HELP)
        return 1
    unset: list[str] = []
    if cpu_bind is not None:
        print(NO_CPU_BINDING, file=sys.stderr)
        try:
            unset = cpu_bind_environment(cpu_bind)[1]
        except ValueError as exc:
            print(exc, "srun: fatal: Failed to parse --cpu-bind= values.", sep="\n", file=sys.stderr)
            return 1
    warning = nodes_within_tasks(options, os.environ)
    # srun that made its own allocation (trainhub.cli.srun) said so as it asked for it
    if warning and not os.environ.get(COMPLETION):
        print(warning, file=sys.stderr)
    for line in unset_lines(unset, "srun"):
        print(line, file=sys.stderr)
    allocated = os.environ.get("SLURM_JOB_NUM_NODES", "")
    if options.nodes is not None and allocated.isdigit() and options.nodes > int(allocated):
        print(f"srun: error: Only allocated {allocated} nodes asked for {options.nodes}", file=sys.stderr)
        return 1
    pty = window_size(0) if options.pty else None
    if options.pty and pty is None:
        print("\n".join(NO_TERMINAL), file=sys.stderr, flush=True)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    client = Client(url, credential, os.environ.get("TRAINHUB_CA_BUNDLE"))
    environment = own_environment(options, dict(os.environ))
    # srun that made its own allocation (trainhub.cli.srun) said its options itself.
    alone = bool(os.environ.get(COMPLETION))
    if options.verbose and not alone:
        _say(*defined_options(allocation_options(options, dict(os.environ))))
    if options.verbose >= 2:
        _say(*propagated_lines(environment), *(ALLOCATION_THREAD if alone else ()), *PLUGINS)
    body = {"argv": options.command, "label": options.label, "environment": environment,
            "nodes": options.nodes, "maxNodes": options.max_nodes, "tasks": tasks,
            "tasksPerNode": options.ntasks_per_node,
            "distribution": options.distribution, "hosts": hosts and [entry for entry, _ in hosts],
            "repeats": hosts and [times for _, times in hosts], "inAllocation": not alone,
            "gpusPerNode": options.gres, "exact": options.exact, "overlap": options.overlap, "pty": pty,
            "srunHost": socket.gethostname().split(".")[0], "srunPid": os.getpid()}
    try:
        step = create(client, {k: v for k, v in body.items() if v is not None})
    except Refused as exc:
        _say_refused(exc)
        if alone:  # srun_job.c: its own allocation completed with 1 (services.lifecycle.job_launch_failed)
            _complete(exit_code=1, signum=0, cancelled=False, launch_failed=True)
        return 1
    if step is None:
        return 128 + _interrupted[0][0]
    try:
        interrupts = Interrupts(client, step)
        _say(*stepd_unset_lines(step, unset, label=options.label))
        if options.verbose:
            _say(*launch_lines(step, dict(os.environ), command=options.command[0], debug=options.verbose >= 2,
                               debug2=options.verbose >= 3))
        with Terminal(client, step["stepId"]) if pty else contextlib.nullcontext():
            ended = follow(client, step["stepId"], label=options.label, num_tasks=step["numTasks"],
                           terminal=pty is not None, interrupts=interrupts,
                           patience=step.get("killWait", 30) + 2,
                           nodes={task: node for node, tasks in step["layout"] for task in tasks})
    except Refused as exc:
        _say_refused(exc)
        return 1
    if ended["state"] == "CANCELLED" and not interrupts.aborted and ended.get("firstNode"):
        # The job ended under the step (scancel, time limit): slurmstepd's line, srun's
        # (srun-details/scancel-8.err).
        node = ended["firstNode"]
        # After a time limit: ``CANCELLED AT T DUE TO TIME LIMIT`` (srun-timeout/srun-2.err).
        cause = f" {ended['cause']}" if ended.get("cause") else ""
        _say(f"slurmstepd-{node}: error: *** STEP {step['jobId']}.{step['stepId']} ON {node} CANCELLED AT "
             f"{ended['endTime']}{cause} ***",
             f"srun: Job step aborted: Waiting up to {step.get('killWait', 30) + 2} seconds for job step to finish.")
    failed = [item for item in ended["failed"] if not (interrupts.ctrl_c_aborted and item[3])
              and item[0] not in ended.get("said", ())]
    if options.verbose:
        _say(*completed_lines(step, ended["failed"], debug2=options.verbose >= 3))
    for line in task_messages(failed):
        print(line, file=sys.stderr)
    if options.verbose >= 2:
        _say(*finished_lines(step, alone=alone, debug2=options.verbose >= 3))
    code = max((code for _, _, code, _ in ended["failed"]), default=0)
    signals = [signum for _, _, _, signum in ended["failed"] if signum]
    if ended["state"] == "CANCELLED" and not ended["failed"]:
        signals = [signal.SIGTERM]
    worst_signal = 0 if code else max(signals, default=0)
    if alone:
        _complete(exit_code=code, signum=worst_signal, cancelled=interrupts.ctrl_c_aborted, launch_failed=False)
    return code or (128 + worst_signal if worst_signal else 0)


def _say_refused(exc: Refused) -> None:
    for line in str(exc).splitlines():
        print(f"srun: error: {line}", file=sys.stderr)


def _complete(*, exit_code: int, signum: int, cancelled: bool, launch_failed: bool) -> None:
    """Say how srun's own allocation is to end (COMPLETION)."""
    with open(os.environ[COMPLETION], "w") as completion:
        json.dump({"exitCode": exit_code, "signal": signum, "cancelled": cancelled, "launchFailed": launch_failed},
                  completion)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
