"""The `trainhub` parser builds a command group, and a Slurm command, only when the command line
names it; the help lists the others by the name and help text main.py gives, which must be what
their own parsers say."""

from __future__ import annotations

import pytest

from trainhub.cli.main import AI_GROUPS, COMMAND_GROUPS, build_parser, main
from trainhub.cli.slurm import COMMANDS


def _subcommands(parser):
    (action,) = [action for action in parser._actions if hasattr(action, "add_lazy")]
    return action


def test_the_help_text_of_each_lazy_group_is_the_one_its_parser_gives() -> None:
    top = _subcommands(build_parser())
    for name, help_text, _ in COMMAND_GROUPS:
        top.build(name)
        assert top.choices[name].description == help_text, name
    ai = _subcommands(top.choices["ai"])
    for name, help_text, _ in AI_GROUPS:
        ai.build(name)
        assert ai.choices[name].description == help_text, name


def test_a_built_group_is_listed_once_in_its_place(capsys: pytest.CaptureFixture[str]) -> None:
    top = _subcommands(build_parser())
    listed = [choice.dest for choice in top._choices_actions]
    top.build("slurm")
    assert [choice.dest for choice in top._choices_actions] == listed == [name for name, _, _ in COMMAND_GROUPS]


def test_the_top_level_help_lists_every_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"], environ={}) == 0
    out = capsys.readouterr().out
    for name, help_text, _ in COMMAND_GROUPS:
        assert f"    {name}" in out and help_text in out


def test_the_ai_help_lists_every_ai_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ai", "--help"], environ={}) == 0
    out = capsys.readouterr().out
    for name, help_text, _ in AI_GROUPS:
        assert f"    {name}" in out and help_text in out


def test_an_unknown_group_is_a_usage_error_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slurmm", "sbatch"], environ={}) == 2
    choices = ", ".join(repr(name) for name, _, _ in COMMAND_GROUPS)
    assert f"invalid choice: 'slurmm' (choose from {choices})" in capsys.readouterr().err


def test_a_slurm_command_line_builds_the_parser_of_the_command_it_names_only() -> None:
    top = _subcommands(build_parser())
    top.build("slurm")
    slurm = top.choices["slurm"]
    args = slurm.parse_args(["squeue", "--cluster", "c", "-l"])
    assert (args.cluster, args.long) == ("c", True)
    commands = _subcommands(slurm)
    assert {name for name, parser in commands.choices.items() if parser is not None} == {"squeue"}
    assert [choice.dest for choice in commands._choices_actions] == [name for name, *_ in COMMANDS]
