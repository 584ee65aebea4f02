"""`graphfix.Error`: the one base of graphfix's own errors, so that an export pipeline can
catch whatever graphfix refuses or cannot do with `except graphfix.Error` (each error says
what went wrong in one line, naming the input or the option)."""


class Error(Exception):
    """What graphfix refuses (a call or option it cannot carry out: `UsageError`) or cannot
    do (an input it cannot read: `InputError`; a graph verify cannot run: `VerifyError`; a
    script that gave no graph: `TraceError`)."""
