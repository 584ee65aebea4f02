"""The command line: `graphfix list|check|fix|verify|demo`, on typer. `main` runs it (its
exit codes, its one-line errors), `app` shapes it (help, option values), `commands` holds
the commands as typed functions over the parameters of `options`, `output` prints their text,
JSON and SARIF (`sarif`) reports; `demo` runs the seed bugs end to end.

The only part of graphfix that imports typer. May import every other part of graphfix;
nothing imports it but `graphfix.__main__`.
"""
