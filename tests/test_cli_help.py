"""Every command's `-h` as blessed: the command line's surface (commands, options, metavars,
defaults, help texts) in one reviewed file. A change to it is a change users see: bless it with
`STEER_BLESS=1 .venv/bin/python -m pytest tests/test_cli_help.py` and review the diff."""

import argparse
import os
from pathlib import Path

from steer import cli

GOLDEN = Path(__file__).parent / "fixtures" / "cli" / "help.txt"


def every_help() -> str:
    top = cli.parser()
    [commands] = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    pages = [top.format_help()] + [commands.choices[name].format_help() for name in sorted(commands.choices)]
    return "\n".join(pages)


def test_every_commands_help_is_as_blessed(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to the terminal's width
    text = every_help()
    if os.environ.get("STEER_BLESS") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "the help changed: bless it (STEER_BLESS=1) and review the diff"
