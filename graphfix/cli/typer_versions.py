"""The typer versions graphfix runs on, and the few of their internals it reaches, named once.

Python 3.10+ has typer 0.29: click vendored as `typer._click`, its errors under
`typer.TyperException`, and each option's value converted by a per-parameter converter that
graphfix replaces (`graphfix.cli.app`). Python 3.9 has typer 0.23 at most: on click itself,
whose own parameter types convert values (graphfix.cli.app sets those), its errors under
`click.ClickException`, and a command's annotations read as they are given (typer 0.29
evaluates them): `Typer` evaluates them first. The command line is the same on both, its
help and its errors included (graphfix.cli.app converts number options itself on either).
"""

from __future__ import annotations

import typer
import typer.core

try:  # typer 0.29
    from typer import TyperException as ParserError
    from typer._click import exceptions as parser_errors
except ImportError:  # typer 0.23, on click
    from click import exceptions as parser_errors
    from click.exceptions import ClickException as ParserError

# The parameter class whose value converter graphfix sets; None where there is none to set.
CONVERTED_PARAMETER: type | None = getattr(typer.core, "_TyperParameter", None)



def _evaluated(function):
    """`function` with its annotations evaluated in its module, as `inspect.signature(...,
    eval_str=True)` does: `from __future__ import annotations` leaves them strings, and the
    `Annotated[..., typer.Option(...)]` of each parameter must be seen for what it is."""
    function.__annotations__ = {
        name: eval(given, function.__globals__) if isinstance(given, str) else given  # noqa: S307
        for name, given in function.__annotations__.items()}
    return function


class Typer(typer.Typer):
    """`typer.Typer`, its commands' and callback's annotations evaluated before typer reads
    them (typer 0.23, on Python 3.9, would read `opt.Only` as a string: an option `--only`
    declared nowhere)."""

    def command(self, *args, **kwargs):
        register = super().command(*args, **kwargs)
        return lambda function: register(_evaluated(function))

    def callback(self, *args, **kwargs):
        register = super().callback(*args, **kwargs)
        return lambda function: register(_evaluated(function))


__all__ = ["CONVERTED_PARAMETER", "ParserError", "Typer", "parser_errors"]
