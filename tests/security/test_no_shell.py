"""No user input reaches a shell: the code base never asks for one, and a job's command runs as an
argument list, its shell metacharacters passed literally."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.agent.test_end_to_end import BASE, make_agent, run_until
from tests.conftest import container_pool, job_body
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob

ROOT = Path(__file__).resolve().parent.parent.parent
SCANNED = ("trainhub", "bench")
#: Calls that always go through a shell.
SHELL_CALLS = {("os", "system"), ("os", "popen"), ("asyncio", "create_subprocess_shell"), ("pty", "spawn"),
               ("subprocess", "getoutput"), ("subprocess", "getstatusoutput")}
#: Calls whose first argument must be a list: a string there is a command line for some parser.
ARGV_CALLS = {("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output")}
ARGV_CALLS |= {("os", name) for name in ("execv", "execve", "execvp", "execvpe", "spawnv", "spawnvp")}


def _dotted(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _is_text(node: ast.expr) -> bool:
    """A string literal, an f-string, or text built with + or %."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_text(node.left) or _is_text(node.right)
    return False


def shell_uses(source: str) -> list[str]:
    """Where ``source`` starts a shell or hands a command line (not an argv list) to exec."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        where = f"line {node.lineno}"
        if any(k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
               for k in node.keywords):
            found.append(f"{where}: shell= argument")
        if name in SHELL_CALLS:
            found.append(f"{where}: {'.'.join(name)}")
        if name in ARGV_CALLS and node.args and _is_text(node.args[0]):
            found.append(f"{where}: {'.'.join(name)} with a string command")
    return found


@pytest.mark.parametrize("source, expected", [
    ("import subprocess\nsubprocess.run('ls ' + x, shell=True)", 2),
    ("import os\nos.system(f'rm {x}')", 1),
    ("import subprocess\nsubprocess.Popen(f'echo {x}')", 1),
    ("import subprocess\nsubprocess.run(['ls', x], shell=False)", 0),
])
def test_the_scanner_finds_shells_and_command_strings(source, expected):
    assert len(shell_uses(source)) == expected


def test_no_code_starts_a_shell_or_passes_a_command_string():
    problems = []
    files = [path for folder in SCANNED for path in (ROOT / folder).rglob("*.py")]
    assert len(files) > 50
    for path in files:
        problems += [f"{path.relative_to(ROOT)} {use}" for use in shell_uses(path.read_text(encoding="utf-8"))]
    assert not problems


PAYLOAD = "$(touch pwned-1); `touch pwned-2` | tee pwned-3 && echo $HOME > pwned-4; touch pwned-5 # '\"*"


@pytest.mark.django_db(transaction=True)
def test_a_job_command_with_shell_metacharacters_runs_as_literal_arguments(api, nodes, now, tmp_path):
    body = job_body(container_pool(command=["printf", "%s\\n"], args=[PAYLOAD, "$(HOME)", "*"]))
    job_id = api("uma").post(BASE, body, format="json").json()["name"].rsplit("/", 1)[1]
    job, _ = run_until(make_agent(tmp_path), CustomJob.objects.get(job_id=job_id), now)
    assert job.state == states.SUCCEEDED
    lines = [entry["text"] for entry in api("uma").get(f"{BASE}/{job_id}/logs").json()["entries"]]
    assert lines == [PAYLOAD, "$(HOME)", "*"]  # no substitution, no globbing, no redirection
    assert not list(tmp_path.rglob("pwned-*"))
