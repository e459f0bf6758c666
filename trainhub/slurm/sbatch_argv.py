"""sbatch's command-line grammar: its options, their short letters, which take a value, and where
the options end and the script begins. Pure Python importing nothing, so that `trainhub slurm sbatch`
can find the script file to send without loading the option parsers (trainhub.slurm.sbatch, which
the server runs on what the CLI sends): a shell loop of sbatch calls pays only this at start-up.

getopt_long's rules, as sbatch.1 follows them:
- Options come as ``-p a4``, ``-pa4``, ``--partition a4`` or ``--partition=a4``; long options may be
  abbreviated to any unique prefix (``--part=a4``).
- The first argument that is not an option (or everything after ``--``) is the script file, and the
  rest are its arguments.
"""

from __future__ import annotations

from collections.abc import Callable


class SbatchError(ValueError):
    """An option sbatch would refuse; the message is sbatch's."""


#: long name -> (short letter or "", takes a value: "required" | "optional" | "none"). What each
#: option means is trainhub.slurm.sbatch's (a test checks both name the same options).
OPTIONS: dict[str, tuple[str, str]] = {
    "job-name": ("J", "required"),
    "partition": ("p", "required"),
    "account": ("A", "required"),
    "qos": ("q", "required"),
    "nodes": ("N", "required"),
    "ntasks": ("n", "required"),
    "ntasks-per-node": ("", "required"),
    "cpus-per-task": ("c", "required"),
    "gres": ("", "required"),
    "gpus-per-node": ("", "required"),
    "time": ("t", "required"),
    "nice": ("", "optional"),
    "hold": ("H", "none"),
    "begin": ("b", "required"),
    "chdir": ("D", "required"),
    "output": ("o", "required"),
    "error": ("e", "required"),
    "requeue": ("", "none"),
    "no-requeue": ("", "none"),
    "comment": ("", "required"),
    "wrap": ("", "required"),
    "dependency": ("d", "required"),
    "parsable": ("", "none"),
    "array": ("a", "required"),
    "test-only": ("", "none"),
    "mem": ("", "required"),
    "mem-per-cpu": ("", "required"),
    "mem-per-gpu": ("", "required"),
    "nodelist": ("w", "required"),
    "exclude": ("x", "required"),
    "exclusive": ("", "optional"),
    "gpus": ("G", "required"),
    "gpus-per-task": ("", "required"),
    "cpus-per-gpu": ("", "required"),
    "export": ("", "required"),
    "signal": ("", "required"),
    "mail-type": ("", "required"),
    "mail-user": ("", "required"),
    "constraint": ("C", "required"),
}
#: srun's options that shape its step, not its job (srun.1): ``trainhub slurm srun`` takes sbatch's
#: options for the allocation it makes and these for the step it runs there.
STEP_OPTIONS: dict[str, tuple[str, str]] = {
    "label": ("l", "none"),
    "pty": ("", "none"),
    "exact": ("", "none"),
    "overlap": ("", "none"),
    "distribution": ("m", "required"),
    "cpu-bind": ("", "required"),
    "verbose": ("v", "none"),
}


def _long_name(given: str, options: dict[str, tuple[str, str]]) -> str:
    if given in options:
        return given
    matches = [name for name in options if name.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SbatchError(f"sbatch: option '--{given}' is ambiguous; possibilities: "
                          + " ".join(f"'--{m}'" for m in matches))
    raise SbatchError(f"sbatch: unrecognized option '--{given}'")


def split_options(argv: list[str], options: dict[str, tuple[str, str]] = OPTIONS,
                  ) -> tuple[list[tuple[str, str | None]], list[str]]:
    """The options of an argument list as (long name, value or None) in the order given, and what
    follows them (a script file and its arguments). ``options``: the grammar (sbatch's, or srun's:
    ``OPTIONS | STEP_OPTIONS``)."""
    by_short = {short: name for name, (short, _) in options.items() if short}
    given: list[tuple[str, str | None]] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            return given, argv[index + 1:]
        if arg.startswith("--"):
            text, has_value, value = arg[2:].partition("=")
            name = _long_name(text, options)
            kind = options[name][1]
            if kind == "none" and has_value:
                raise SbatchError(f"sbatch: option '--{name}' doesn't allow an argument")
            if kind == "required" and not has_value:
                if index + 1 >= len(argv):
                    raise SbatchError(f"sbatch: option '--{name}' requires an argument")
                index += 1
                value, has_value = argv[index], "="
            given.append((name, value if has_value else None))
        elif arg.startswith("-") and len(arg) > 1:
            # getopt's short options: flags may be grouped (``-vv``, ``-lv``), the last one may take
            # the rest as its value (``-vN1``).
            for position in range(1, len(arg)):
                letter = arg[position]
                if letter not in by_short:
                    raise SbatchError(f"sbatch: invalid option -- '{letter}'")
                name = by_short[letter]
                if options[name][1] == "none":
                    given.append((name, None))
                    continue
                value = arg[position + 1:]
                if not value:
                    if index + 1 >= len(argv):
                        raise SbatchError(f"sbatch: option requires an argument -- '{letter}'")
                    index += 1
                    value = argv[index]
                given.append((name, value))
                break
        else:
            return given, argv[index:]
        index += 1
    return given, []


def script_path(name: str, *, chdir: str, search: str | None, is_file: Callable[[str], bool]) -> str:
    """The script file sbatch reads for ``name`` and gives the job as its Command (squeue's %o), as
    sbatch resolves it (slurm: search_path(opt.chdir, name, false, R_OK, false)): a name starting
    with ``.`` or ``/`` as given; otherwise the first file of ``chdir``/name (--chdir made absolute,
    else the submit directory), then each directory of ``search`` (PATH; one starting with ``.`` is
    under ``chdir``), else as given - and without a PATH as given (fixtures/22.05/command-path:
    ``sbatch ls`` submits the directory's ls, ``--chdir=d job2.sh`` d's; command-tres: ``job.sh`` is
    /tmp/command-tres.8jqENq/job.sh, ``./sub/j2.sh`` and ``sub/j2.sh`` stay so)."""
    if name.startswith((".", "/")) or search is None:
        return name
    for directory in [chdir, *(entry for entry in search.split(":") if entry)]:
        candidate = f"{chdir}/{directory}/{name}" if directory.startswith(".") else f"{directory}/{name}"
        if is_file(candidate):
            return candidate
    return name
