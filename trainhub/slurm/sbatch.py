"""sbatch's options, from a command line and from a script's ``#SBATCH`` lines. Pure Python.

Rules of sbatch.1 followed here (the command line's grammar - option names, which take a value,
where the script begins - is trainhub.slurm.sbatch_argv's, which the CLI uses alone):
- A script's ``#SBATCH`` directives are read from the top of the script and stop at the first
  line that is neither blank nor a comment; options given on the command line override them.
- A batch script must start with ``#!``; ``--wrap`` makes one: ``#!/bin/sh`` + a comment + the
  command (sbatch's own text).
- ``--nice`` without a value means 100; ``-N 2-4`` asks for at least 2 nodes (trainhub allocates
  the minimum); ``--gres=gpu[:type]:N`` and ``--gpus-per-node=[type:]N`` ask N GPUs per node.

Supported: -J/--job-name, -p/--partition, -A/--account, -q/--qos, -N/--nodes, -n/--ntasks,
--ntasks-per-node, -c/--cpus-per-task, --gres, --gpus-per-node, -t/--time, --nice, -H/--hold,
--begin, -D/--chdir, -o/--output, -e/--error, --requeue, --no-requeue, --comment, --wrap,
-d/--dependency (trainhub.slurm.dependency), --parsable (print only the job id), -a/--array (kept as
written; trainhub.slurm.arrays parses it against the cluster's MaxArraySize), --test-only, --mem,
--mem-per-cpu, --mem-per-gpu (megabytes unless K/M/G/T; one of them), -w/--nodelist, -x/--exclude,
--exclusive, -G/--gpus and --gpus-per-task ([type:]N), --cpus-per-gpu, --export, --signal=[R][B:]SIG[@TIME],
--mail-type, --mail-user, -C/--constraint.
Anything else is "sbatch: unrecognized option".
"""

from __future__ import annotations

import datetime as dt
import math
import re
import shlex
from dataclasses import dataclass, fields, replace

from trainhub.slurm.sbatch_argv import SbatchError, split_options
from trainhub.slurm.timefmt import TimeFormatError, parse_time_limit
from trainhub.slurm.tres import TresFormatError, parse_gres

WRAP_HEADER = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n"
NOT_A_SCRIPT = ("sbatch: error: This does not look like a batch script.  The first\n"
                "sbatch: error: line must start with #! followed by the path to an interpreter.\n"
                "sbatch: error: For instance: #!/bin/sh")
DEFAULT_NICE = 100
MAX_NICE = 2147483645


#: slurmctld's answer to a name, comment or path longer than it keeps (ESLURM_PATHNAME_TOO_LONG).
PATHNAME_TOO_LONG = "Pathname of a file, directory or other parameter too long"
#: The longest value of each text option trainhub keeps (trainhub.slurm.models.SlurmJob's columns;
#: a test checks they agree). slurmctld's own limits are 1024 for names and comments, 4096 for paths.
MAX_LENGTH = {"job_name": 255, "comment": 255, "chdir": 1024, "output": 1024, "error": 1024, "export": 1024,
              "mail_user": 255, "mail_type": 128, "signal": 64, "gpu_request": 255}


def too_long(options: SbatchOptions) -> str | None:
    """The first text option longer than MAX_LENGTH allows, or None."""
    return next((name for name, limit in MAX_LENGTH.items() if len(getattr(options, name) or "") > limit), None)


@dataclass(frozen=True)
class SbatchOptions:
    """What was asked; None means not given (defaults apply at submission)."""

    job_name: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    nodes: int | None = None
    #: -N MIN[-MAX]'s MAX (MIN when no range is given); None without -N.
    max_nodes: int | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    gpus_per_node: int | None = None
    #: --gpus-per-node's count (None: the GPUs per node came from --gres, or none were asked), which
    #: sbatch exports as SLURM_GPUS_PER_NODE.
    gpus_per_node_option: int | None = None
    gpu_type: str | None = None
    #: The GPU request as sbatch sends it, whichever option gave it (gres:gpu:tesla:2, gres:gpu:x,
    #: gres:gpu:02): slurmctld keeps and prints it as written (SlurmJob.gpu_request).
    gpu_request: str | None = None
    #: Minutes; 0 is "no limit" and becomes None after parsing (see time_given).
    time_limit: int | None = None
    time_given: bool = False
    nice: int | None = None
    hold: bool | None = None
    begin: str | None = None
    chdir: str | None = None
    output: str | None = None
    error: str | None = None
    requeue: bool | None = None
    comment: str | None = None
    wrap: str | None = None
    dependency: str | None = None
    parsable: bool | None = None
    array: str | None = None
    test_only: bool | None = None
    #: --mem / --mem-per-cpu / --mem-per-gpu in MB (at most one of them; see check_memory).
    mem: int | None = None
    mem_per_cpu: int | None = None
    mem_per_gpu: int | None = None
    nodelist: str | None = None
    exclude: str | None = None
    exclusive: bool | None = None
    #: --gpus (for the whole job) and --gpus-per-task, as ([type], count).
    gpus: tuple[str | None, int] | None = None
    gpus_per_task: tuple[str | None, int] | None = None
    #: --cpus-per-gpu: CPUs allocated with each GPU (not with --cpus-per-task; see check_cpus_per_gpu).
    cpus_per_gpu: int | None = None
    export: str | None = None
    signal: str | None = None
    mail_type: str | None = None
    mail_user: str | None = None
    constraint: str | None = None

    def over(self, base: SbatchOptions) -> SbatchOptions:
        """These options, taking ``base``'s where these are not given (command line over #SBATCH)."""
        given = {f.name: getattr(self, f.name) for f in fields(self)
                 if getattr(self, f.name) is not None and f.name not in ("time_limit", "time_given")}
        if self.time_given:
            given.update(time_limit=self.time_limit, time_given=True)
        return replace(base, **given)


#: The largest count or size sbatch passes on (a C int; trainhub's columns are 32-bit too).
INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def _int_arg(value: int, flag: str) -> int:
    """``value`` unless above INT_MAX, refused as slurm:src/common/proc_args.c parse_int does (its
    spelling; strtol stops at LONG_MAX). A larger number would reach the database as a 500."""
    if value > INT_MAX:
        raise SbatchError(f"sbatch: error: Numeric argument ({min(value, _LONG_MAX)}) to big for {flag}.")
    return value


def _count(name: str, minimum: int = 1, *, below_is_not_numeric: bool = False):
    """A count of at least ``minimum``; one below it is an invalid value, or where sbatch reads the
    option with parse_int's positive check (``below_is_not_numeric``: --cpus-per-gpu=0) an invalid
    numeric value, as text that is not a number is."""
    def parse(text: str) -> int:
        not_numeric = SbatchError(f"sbatch: error: Invalid numeric value \"{text}\" for {name}.")
        if not re.fullmatch(r"\d+", text.strip()):
            raise not_numeric
        value = _int_arg(int(text), name)
        if value < minimum:
            raise not_numeric if below_is_not_numeric else SbatchError(f"sbatch: error: Invalid {name} value: {text}")
        return value
    return parse


def _nodes(text: str) -> dict:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", text.strip())
    if not match or int(match.group(1)) < 1 or (match.group(2) and int(match.group(2)) < int(match.group(1))):
        raise SbatchError(f"sbatch: error: \"{text}\" is not a valid node count")
    low = _int_arg(int(match.group(1)), "--nodes")
    return {"nodes": low, "max_nodes": _int_arg(int(match.group(2)), "--nodes") if match.group(2) else low}


def _gres(text: str, flag: str = "--gres") -> dict:
    """``--gres=gpu[:type][:N]``, kept as written with sbatch's ``gres:`` prefix (gres.c
    gres_prepend_tres_type; fixtures/22.05/gputype: ``--gres=gpu`` is TresPerNode=gres:gpu)."""
    try:
        requests = parse_gres(text)
    except TresFormatError as exc:
        raise SbatchError(f"sbatch: error: Invalid generic resource (gres) specification: {text} ({exc})") from exc
    gpus = [r for r in requests if r.name == "gpu"]
    others = [r.name for r in requests if r.name != "gpu"]
    if others:
        raise SbatchError(f"sbatch: error: Invalid generic resource (gres) specification: {text} "
                          f"(this cluster has no {', '.join(others)} GRES)")
    if len(gpus) != 1:
        raise SbatchError(f"sbatch: error: Invalid generic resource (gres) specification: {text}")
    count = _int_arg(gpus[0].count, flag)
    return {"gpus_per_node": count, "gpu_type": gpus[0].type,
            "gpus_per_node_option": count if flag == "--gpus-per-node" else None,
            "gpu_request": text if text.startswith("gres:") else f"gres:{text}"}


def _gpus_per_node(text: str) -> dict:
    """``--gpus-per-node=[type:]N``: sbatch sends it as ``gres:gpu:`` and the text (opt.c xfmt_tres)."""
    return _gres(f"gpu:{text}", "--gpus-per-node")


def _time(text: str) -> dict:
    try:
        return {"time_limit": parse_time_limit(text), "time_given": True}
    except TimeFormatError as exc:
        raise SbatchError("sbatch: error: Invalid --time specification") from exc


def _nice(text: str | None) -> dict:
    if text is None or text == "":
        return {"nice": DEFAULT_NICE}
    if not re.fullmatch(r"[+-]?\d+", text.strip()) or abs(int(text)) > MAX_NICE:
        raise SbatchError(f"sbatch: error: Invalid nice value, must be between -{MAX_NICE} and {MAX_NICE}")
    return {"nice": int(text)}


_MEMORY = re.compile(r"(\d+)([KMGT]?)B?", re.IGNORECASE)
_MEMORY_UNITS = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def _memory(field: str, flag: str):
    """``--mem=2G``: a size in megabytes unless suffixed K, M, G or T (Slurm's str_to_mbytes)."""
    def parse(text: str) -> dict:
        match = _MEMORY.fullmatch(text.strip())
        if not match:
            raise SbatchError(f"sbatch: error: Invalid {flag} specification")
        return {field: _int_arg(math.ceil(int(match.group(1)) * _MEMORY_UNITS[match.group(2).upper()]), flag)}
    return parse


def check_memory(options: SbatchOptions) -> None:
    """sbatch refuses two of --mem, --mem-per-cpu and --mem-per-gpu together."""
    if sum(value is not None for value in (options.mem, options.mem_per_cpu, options.mem_per_gpu)) > 1:
        raise SbatchError("sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")


#: sbatch's (salloc's, srun's) lines for --cpus-per-gpu with --cpus-per-task (fixtures/22.05/cpus-per-gpu/sbatch-c.err).
CPUS_PER_GPU_AND_TASK = ("sbatch: error: --cpus-per-gpu is mutually exclusive with --cpus-per-task\n"
                         "sbatch: error: Invalid generic resource (gres) specification")


def check_cpus_per_gpu(options: SbatchOptions) -> None:
    """sbatch refuses --cpus-per-gpu with --cpus-per-task, in either order."""
    if options.cpus_per_gpu is not None and options.cpus_per_task is not None:
        raise SbatchError(CPUS_PER_GPU_AND_TASK)


def _gpu_count(field: str, flag: str):
    """``--gpus=[type:]N`` and ``--gpus-per-task=[type:]N``; a lone word is a type of one GPU, as
    slurmctld reads ``gpu:x`` (fixtures/22.05/options: ``--gpus=x`` is TresPerJob=gres:gpu:x)."""
    def parse(text: str) -> dict:
        kind, _, count = text.strip().rpartition(":")
        if not kind and count and not count.isdigit():
            kind, count = count, "1"
        if not count.isdigit() or int(count) < 1:
            raise SbatchError(f"sbatch: error: Invalid {flag} specification: {text}")
        return {field: (kind or None, _int_arg(int(count), flag)), "gpu_request": f"gres:gpu:{text}"}
    return parse


#: sbatch.1 --mail-type values.
MAIL_TYPES = frozenset({"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT",
                        "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS"})


def _mail_type(text: str) -> dict:
    names = [name.strip().upper() for name in text.split(",")]
    if not all(name in MAIL_TYPES for name in names):
        raise SbatchError("sbatch: error: Invalid --mail-type specification")
    return {"mail_type": ",".join(names)}


_SIGNAL = re.compile(r"(?:(R?B?|B?R?):)?([A-Za-z0-9]+)(?:@(\d+))?")
#: The signals --signal may name (without SIG), with their numbers (signal.7, x86/ARM).
SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13,
           "ALRM": 14, "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23,
           "XCPU": 24, "XFSZ": 25, "VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29}


def _signal(text: str) -> dict:
    """``--signal=[{R}{B}:]SIG[@TIME]``: SIG by name (with or without SIG) or number, TIME seconds
    before the end (60 when not given)."""
    match = _SIGNAL.fullmatch(text.strip())
    name = (match.group(2).upper().removeprefix("SIG") if match else "")
    if not match or not (name in SIGNALS or (name.isdigit() and 0 < int(name) < 65)):
        raise SbatchError("sbatch: error: Invalid --signal specification")
    flags = f"{match.group(1)}:" if match.group(1) else ""
    return {"signal": f"{flags}{name}@{match.group(3) or 60}"}


def _single(field: str):
    return lambda text: {field: text}


#: What each option of trainhub.slurm.sbatch_argv.OPTIONS asks, from its value (None when it has none).
_PARSERS = {
    "job-name": _single("job_name"),
    "partition": _single("partition"),
    "account": _single("account"),
    "qos": _single("qos"),
    "nodes": _nodes,
    "ntasks": lambda t: {"ntasks": _count("--ntasks")(t)},
    "ntasks-per-node": lambda t: {"ntasks_per_node": _count("--ntasks-per-node")(t)},
    "cpus-per-task": lambda t: {"cpus_per_task": _count("--cpus-per-task")(t)},
    "gres": _gres,
    "gpus-per-node": _gpus_per_node,
    "time": _time,
    "nice": _nice,
    "hold": lambda _: {"hold": True},
    "begin": _single("begin"),
    "chdir": _single("chdir"),
    "output": _single("output"),
    "error": _single("error"),
    "requeue": lambda _: {"requeue": True},
    "no-requeue": lambda _: {"requeue": False},
    "comment": _single("comment"),
    "wrap": _single("wrap"),
    "dependency": _single("dependency"),
    "parsable": lambda _: {"parsable": True},
    "array": _single("array"),
    "test-only": lambda _: {"test_only": True},
    "mem": _memory("mem", "--mem"),
    "mem-per-cpu": _memory("mem_per_cpu", "--mem-per-cpu"),
    "mem-per-gpu": _memory("mem_per_gpu", "--mem-per-gpu"),
    "nodelist": _single("nodelist"),
    "exclude": _single("exclude"),
    "exclusive": lambda _: {"exclusive": True},
    "gpus": _gpu_count("gpus", "--gpus"),
    "gpus-per-task": _gpu_count("gpus_per_task", "--gpus-per-task"),
    "cpus-per-gpu": lambda t: {"cpus_per_gpu": _count("--cpus-per-gpu", below_is_not_numeric=True)(t)},
    "export": _single("export"),
    "signal": _signal,
    "mail-type": _mail_type,
    "mail-user": _single("mail_user"),
    "constraint": _single("constraint"),
}


def parse_options(argv: list[str]) -> tuple[SbatchOptions, list[str]]:
    """Options from an argument list, and what follows them (a script file and its arguments)."""
    given, rest = split_options(argv)
    values: dict = {}
    for name, value in given:
        try:
            values.update(_PARSERS[name](value))
        except SbatchError:
            raise
        except ValueError as exc:  # int() of a number over 4,300 digits long: Python's guard, not a parser's
            raise SbatchError(f"sbatch: error: Invalid numeric value \"{value}\" for --{name}.") from exc
    return SbatchOptions(**values), rest


def nodes_within_tasks(options: SbatchOptions) -> tuple[SbatchOptions, list[str]]:
    """-N against -n, once the command line and the #SBATCH lines are merged (slurm:src/sbatch/opt.c
    _opt_verify; salloc and srun check the same; fixtures/22.05/tasks-nodes): every node runs a task,
    so a node count above the task count is lowered to it. Below -N's minimum the submitter says
    ``Warning: can't run 2 processes on 3 nodes, setting nnodes to 2`` (the warning lines, without
    the program's name, come second); -N MIN-MAX's MAX is lowered silently (``-N 1-4 -n 2``)."""
    if options.ntasks is None or options.nodes is None:
        return options, []
    warnings, nodes = [], options.nodes
    if options.ntasks < nodes:
        warnings.append(f"Warning: can't run {options.ntasks} processes on {nodes} nodes, "
                        f"setting nnodes to {options.ntasks}")
        nodes = options.ntasks
    return replace(options, nodes=nodes, max_nodes=min(options.max_nodes or nodes, options.ntasks)), warnings


def script_directives(script: str) -> SbatchOptions:
    """The options of the script's leading ``#SBATCH`` lines."""
    argv: list[str] = []
    for number, line in enumerate(script.splitlines()):
        text = line.strip()
        if number == 0 and text.startswith("#!"):
            continue
        if not text:
            continue
        if not text.startswith("#"):
            break
        if text.startswith("#SBATCH"):
            try:
                argv += shlex.split(text[len("#SBATCH"):], comments=True)
            except ValueError as exc:
                raise SbatchError(f"sbatch: error: cannot parse '{text}': {exc}") from exc
    options, rest = parse_options(argv)
    if rest:
        raise SbatchError(f"sbatch: error: Invalid #SBATCH option '{rest[0]}'")
    return options


def batch_script(*, script: str | None, options: SbatchOptions) -> str:
    """The script to run: the given one (which must start with #!) or the --wrap one."""
    if options.wrap is not None:
        if script:
            raise SbatchError("sbatch: error: Script arguments not permitted with --wrap option")
        return f"{WRAP_HEADER}{options.wrap}\n"
    if not script or not script.strip():
        raise SbatchError("sbatch: error: Batch job submission failed: a batch script or --wrap is required")
    if not script.startswith("#!"):
        raise SbatchError(NOT_A_SCRIPT)
    return script


def parse_begin(text: str, now: dt.datetime) -> dt.datetime:
    """--begin: ``now[+N[seconds|minutes|hours|days|weeks]]`` (bare N = seconds; ``hour`` as ``hours``), ``HH:MM[:SS]``
    (today, or tomorrow if past), ``YYYY-MM-DD[THH:MM[:SS]]`` (UTC), ``midnight``/``noon``/``teatime``."""
    value = text.strip().lower()
    relative = re.fullmatch(r"now(?:\+(\d+)(second|minute|hour|day|week)?s?)?", value)
    if relative:
        try:
            amount = int(relative.group(1) or 0)
            return now + dt.timedelta(**{(relative.group(2) or "second") + "s": amount})
        except (OverflowError, ValueError) as exc:  # past year 9999; int() of over 4,300 digits
            raise SbatchError(f"sbatch: error: Invalid time specification {text}") from exc
    named = {"midnight": (0, 0), "noon": (12, 0), "teatime": (16, 0)}
    clock = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", value)
    if clock or value in named:
        hour, minute = named[value] if value in named else (int(clock.group(1)), int(clock.group(2)))
        second = int(clock.group(3) or 0) if clock else 0
        try:
            moment = now.replace(hour=hour, minute=minute, second=second, microsecond=0)
        except ValueError as exc:
            raise SbatchError(f"sbatch: error: Invalid time specification {text}") from exc
        return moment if moment > now else moment + dt.timedelta(days=1)
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise SbatchError(f"sbatch: error: Invalid time specification {text}") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
