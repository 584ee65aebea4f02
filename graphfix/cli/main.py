"""`main`: the `graphfix` command line (typer), its exit codes, and its errors as one line.

Exit codes: what the command returns (0, or 1 for findings, changes, a failed verify), 2 for
any error, usage errors included (a full or closed standard output too), 130 on Ctrl-C; a
pipe whose reader left (`| head -1`) ends the run quietly with 1.
"""

from __future__ import annotations

import os
import re
import sys

from graphfix import registry, tf_runtime
from graphfix.cli import foreign_output, graphpath
from graphfix.cli.output import StdoutLost, drop_stdout, fail, guard_stdout


def _usage_error(exc, words: list[str], commands) -> str:
    """A usage error (typer's, from parsing the command line) as graphfix's one line,
    worded as argparse words it: `check: unrecognized arguments: --in-place (see graphfix
    check --help)`."""
    from graphfix.cli.typer_versions import parser_errors

    BadOptionUsage, BadParameter = parser_errors.BadOptionUsage, parser_errors.BadParameter
    MissingParameter, NoSuchOption = parser_errors.MissingParameter, parser_errors.NoSuchOption

    if exc.ctx is not None:
        path = exc.ctx.command_path
    else:  # (an option's missing value is said before the command's context exists)
        path = " ".join(["graphfix", *[w for w in words[:1] if w in commands]])
    command = path.removeprefix("graphfix").strip()
    extra = re.fullmatch(r"Got unexpected extra argument(?:s|\(s\))? \((.*)\)", exc.message)
    if isinstance(exc, NoSuchOption):
        message = f"unrecognized arguments: {exc.option_name}"
    elif extra:
        message = f"unrecognized arguments: {extra.group(1)}"
    elif isinstance(exc, MissingParameter) and exc.param is not None:
        named = ("/".join(sorted(exc.param.opts, key=len)) if exc.param.param_type_name == "option"
                 else exc.param.metavar or exc.param.name)
        message = f"the following arguments are required: {named}"
    elif isinstance(exc, BadParameter) and exc.param is not None:
        message = f"argument {'/'.join(exc.param.opts)}: {exc.message}"
    elif isinstance(exc, BadOptionUsage):
        message = f"argument {exc.option_name}: expected one argument"
    else:
        message = exc.message
    return f"{command + ': ' if command else ''}{message} (see {path} --help)"


def _usage_and_exit(command) -> None:
    """`graphfix` alone: its help on stderr and exit 2, a usage error (ruff's way)."""
    with command.make_context("graphfix", [], resilient_parsing=True) as ctx:
        help_text = command.get_help(ctx)
    sys.stderr.write(help_text + "\n")
    sys.exit(2)


def _completion_script(shell: str) -> int:
    """`graphfix --show-completion SHELL`: the script of the shell named. (typer takes the
    option for a flag wherever it can detect the shell, and prints the script of the shell
    that started graphfix: zsh's for `--show-completion bash` typed in zsh, an error in a
    script run by sh.)"""
    from typer.completion import Shells, get_completion_script

    shells = [known.value for known in Shells]
    if shell not in shells:
        fail(f"argument --show-completion: invalid choice: {shell!r} (choose from "
             f"{', '.join(map(repr, shells))}) (see graphfix --help)")
    sys.stdout.write(get_completion_script(prog_name="graphfix",
                                           complete_var="_GRAPHFIX_COMPLETE", shell=shell) + "\n")
    return 0


def _typer_main(words: list[str]) -> int | None:
    """`graphfix WORDS...` on typer's command line: every command, help, usage errors."""
    import typer
    import typer.main

    import graphfix.cli.commands  # noqa: F401  (registers the commands on the app)
    import graphfix.cli.tracing  # noqa: F401  (and `trace`)
    from graphfix.cli.app import app
    from graphfix.cli.typer_versions import ParserError

    command = typer.main.get_command(app)
    try:
        if not words and "_GRAPHFIX_COMPLETE" not in os.environ:  # (a shell asking to complete)
            _usage_and_exit(command)
        if len(words) == 2 and words[0] == "--show-completion":
            return _completion_script(words[1])
        return command.main(words, prog_name="graphfix", standalone_mode=False)
    except ParserError as exc:  # typer's parser said no: a usage error
        fail(_usage_error(exc, words, command.commands) if hasattr(exc, "ctx")
             else exc.format_message())


def main(argv: list[str] | None = None) -> None:
    """Run `graphfix ARGV...` (default: this process's arguments) and exit with its code."""
    # TF's C++ start-up chatter (cuda probes, cpu features) is not ours to show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    closed = guard_stdout()
    if closed:
        fail(closed)
    words = sys.argv[1:] if argv is None else list(argv)
    with tf_runtime.before_import(foreign_output.divert):
        try:
            code = graphpath.run(words)  # (None: not a plain check or fix of graphs)
            if code is None:
                code = _typer_main(words)
            sys.stdout.flush()
        except KeyboardInterrupt:
            code = 130
        except registry.UsageError as exc:  # e.g. a broken third-party transform
            fail(str(exc))
        except (BrokenPipeError, StdoutLost) as exc:
            drop_stdout()
            if isinstance(exc, StdoutLost) and not exc.reader_left:
                fail(f"standard output: cannot write: {exc}")
            code = 1  # `graphfix check ... | head`: the reader left; say nothing more.
        finally:
            foreign_output.restore()
    sys.exit(code or 0)
