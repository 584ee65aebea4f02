"""The typer application the commands are registered on, and the shape of its command line:
help as an argparse-style usage line over rich panels (one per `rich_help_panel`), and
option values converted by the option's own type without building a pydantic adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, get_args

import typer
import typer.core

from graphfix import __version__
from graphfix.cli.typer_versions import CONVERTED_PARAMETER, Typer

OPTIONS_PANEL = "Options"


class _PlainValue:
    """An option's value converted as its annotation says (str, int with the option's
    minimum, Path), where typer 0.29 would import pydantic and build a TypeAdapter for every
    option of the command, given or not: more than the whole rest of a small graph's run."""

    def coerce(self, value: Any, param: typer.core._TyperParameter, ctx: typer.Context) -> Any:
        annotation = param.type_descriptor.annotation
        if param.multiple or param.nargs == -1:
            if value is None:
                return ()
            (kind,) = get_args(annotation) or (str,)
            return [_converted(item, kind, param, param.min) for item in value]
        return None if value is None else _converted(value, annotation, param, param.min)


def _converted(value: Any, kind: type, param, minimum: int | None) -> Any:
    if kind in (int, float) and not isinstance(value, kind):
        try:
            value = kind(value)
        except ValueError:
            raise typer.BadParameter(f"not a number: {value!r}", param=param) from None
        if kind is float and not 0 < value < float("inf"):  # (nan too)
            raise typer.BadParameter(f"must be a positive number of seconds, not {value}",
                                     param=param)
    if kind is int and minimum is not None and value < minimum:
        raise typer.BadParameter(f"must be at least {minimum}, not {value}", param=param)
    if kind is Path:
        return Path(value)
    return value


_PLAIN_VALUE = _PlainValue()


def _with_plain_values(params: list) -> list:
    """`params` (a command's, its help option's included), each set to convert its value
    with `_PlainValue`: typer builds its converter on first use, and uses one already set
    (docs/benchmarks.md has the fixed cost with and without)."""
    if CONVERTED_PARAMETER is None:  # (typer 0.23: click's types convert, no adapter)
        return _with_plain_numbers(params)
    for param in params:
        if isinstance(param, CONVERTED_PARAMETER):
            param._runtime_param = _PLAIN_VALUE
    return params


def _with_plain_numbers(params: list) -> list:
    """`params` on typer 0.23 (Python 3.9), whose click number types convert: each number
    option's type set to convert as `_converted` does, so that a bad value is refused in the
    same words (and a timeout that is not positive refused at all)."""
    import click

    for param in params:
        given = param.type
        kind = (int if isinstance(given, click.types.IntParamType)
                else float if isinstance(given, click.types.FloatParamType) else None)
        if kind is not None:
            param.type = _click_number(kind, getattr(given, "min", None))
    return params


def _click_number(kind: type, minimum: int | None):
    """A click parameter type converting to `kind` (at least `minimum`) as `_converted`."""
    import click

    class PlainNumber(click.ParamType):
        name = kind.__name__

        def convert(self, value, param, ctx):
            return _converted(value, kind, param, minimum)

    return PlainNumber()


def _names(param) -> list[str]:
    """An option's names, short ones first."""
    return sorted(param.opts, key=len)


def _usage(ctx: typer.Context, command) -> list[str]:
    """The usage line's words, argparse's way: every option with its metavar, then the
    arguments."""
    words, arguments = [], []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if isinstance(param, typer.core.TyperArgument):
            name = param.metavar or param.name.upper()
            if param.nargs != -1:
                arguments.append(name if param.required else f"[{name}]")
            else:  # (argparse's forms of nargs="+" and nargs="*")
                arguments.append(f"{name} [{name} ...]" if param.required else f"[{name} ...]")
        elif param.is_flag:
            words.append(f"[{_names(param)[0]}]")
        else:
            word = f"{_names(param)[0]} {param.metavar or param.name.upper()}"
            words.append(word if param.required else f"[{word}]")
    if isinstance(command, typer.core.TyperGroup):
        arguments.append("COMMAND ...")
    return [*words, *arguments]


def _wrapped(prefix: str, words: list[str], width: int) -> list[str]:
    """`prefix` then `words`, wrapped at `width` without breaking a word, continuation lines
    indented under the first word."""
    lines, line = [], prefix.rstrip()
    indent = " " * len(prefix)
    for word in words:
        if len(line) + 1 + len(word) > width and line.strip() != prefix.strip():
            lines.append(line)
            line = indent + word
        else:
            line += " " + word
    lines.append(line)
    return lines


def first_sentence(help_text: str) -> str:
    """A command's summary in the list of commands: the first sentence of its help, whole
    (its docstring's lines joined), never cut at a line's end."""
    paragraph = " ".join(help_text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def _help_text(ctx: typer.Context, command) -> str:
    """The command's help: usage, description, then a panel of arguments, one of options per
    help panel and, for the group, one of commands."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    width = console.width

    def panel(title: str, rows: list[tuple[str, str]], indent: int = 0) -> Panel:
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1), expand=True)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(ratio=1)
        for name, help_text in rows:
            table.add_row(Text(name), Text(help_text))
        return Panel(Padding(table, (0, 0, 0, indent)), title=title, title_align="left",
                     border_style="dim")

    arguments, panels = [], {}
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if isinstance(param, typer.core.TyperArgument):
            arguments.append((param.metavar or param.name.upper(), param.help or ""))
            continue
        name = ", ".join(_names(param))
        if not param.is_flag:
            name += f" {param.metavar or param.name.upper()}"
        panel_name = getattr(param, "rich_help_panel", None) or OPTIONS_PANEL
        panels.setdefault(panel_name, []).append((name, param.help or ""))
    with console.capture() as captured:
        for line in _wrapped(f"usage: {ctx.command_path} ", _usage(ctx, command), width):
            console.print(line, markup=False, soft_wrap=True)
        if command.help:
            console.print()
            console.print(Text(command.help.strip()))
        console.print()
        if arguments:
            console.print(panel("Arguments", arguments))
        for title, rows in panels.items():
            console.print(panel(title, rows))
        if isinstance(command, typer.core.TyperGroup):
            rows = [(name, first_sentence(sub.help or ""))
                    for name, sub in command.commands.items() if not sub.hidden]
            # (listed indented under the panel's title, as argparse lists sub-commands)
            console.print(panel("Commands", rows, indent=3))
    return captured.get().rstrip("\n")


class Command(typer.core.TyperCommand):
    """A graphfix command: argparse-style usage over rich panels, plain option values."""

    def get_params(self, ctx: typer.Context) -> list:
        return _with_plain_values(super().get_params(ctx))

    def format_help(self, ctx: typer.Context, formatter) -> None:
        formatter.write(_help_text(ctx, self))


class Group(typer.core.TyperGroup):
    """The `graphfix` command itself: its options, and its commands listed in its help."""

    def get_params(self, ctx: typer.Context) -> list:
        return _with_plain_values(super().get_params(ctx))

    def format_help(self, ctx: typer.Context, formatter) -> None:
        formatter.write(_help_text(ctx, self))

    def resolve_command(self, ctx: typer.Context, args: list[str]):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            choices = ", ".join(repr(name) for name in self.commands)
            ctx.fail(f"argument COMMAND: invalid choice: {args[0]!r} (choose from {choices})")
        return super().resolve_command(ctx, args)


app = Typer(cls=Group, add_completion=True,
            context_settings={"help_option_names": ["-h", "--help"]},
            pretty_exceptions_enable=False)


def _show_version(value: bool) -> None:
    if value:
        print(f"graphfix {__version__}")
        raise typer.Exit(0)


@app.callback()
def graphfix(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_show_version,
        help="show graphfix's version and exit")] = False) -> None:
    """Find and fix TF1-style multi-GPU and distributed-training bugs in graphs and code."""
