"""The typer versions graphfix runs on, and the few of their internals it reaches, named once.

Python 3.10+ has typer 0.29: click vendored as `typer._click`, its errors under
`typer.TyperException`, and each option's value converted by a per-parameter converter that
graphfix replaces (`graphfix.cli.app`). Python 3.9 has typer 0.23 at most: on click itself,
whose own parameter types convert values (no converter to replace), its errors under
`click.ClickException`. The command line is the same on both; a value click's types refuse
(`--jobs 0`) is said in click's words there.
"""

from __future__ import annotations

import typer.core

try:  # typer 0.29
    from typer import TyperException as ParserError
    from typer._click import exceptions as parser_errors
except ImportError:  # typer 0.23, on click
    from click import exceptions as parser_errors
    from click.exceptions import ClickException as ParserError

# The parameter class whose value converter graphfix sets; None where there is none to set.
CONVERTED_PARAMETER: type | None = getattr(typer.core, "_TyperParameter", None)

__all__ = ["CONVERTED_PARAMETER", "ParserError", "parser_errors"]
