"""Custom-op registrations, read without the TF runtime in this process.

Two sources say whether a custom op is registered stateful: its C++ (`REGISTER_OP("Name")`
chains, read as text) and its built library (`tf.load_op_library`, run in a child process so
the graph path never imports TF's runtime). The C++ fix (`.SetIsStateful()` added to a chain)
lives here too, so reading and rewriting agree on what a chain is.
"""

from __future__ import annotations

import json
import os
import re
import sys
from functools import cache
from typing import NamedTuple

from graphfix.registry import UsageError
from graphfix.tf_runtime import op_library_refused, op_library_stat, require_tensorflow

# `REGISTER_OP("Name")` up to the `;` that ends the chain (a `;` inside a shape function's
# braces does not end it: the chain is read with its brackets balanced, `_chain_end`).
_REGISTER_OP = re.compile(r'\bREGISTER_OP\s*\(\s*"(?P<name>[A-Za-z0-9_>]+)"\s*\)')
_STATEFUL = re.compile(r"\.\s*SetIsStateful\s*\(\s*\)")


class Chain(NamedTuple):
    """One `REGISTER_OP` chain in a source: the op, where its text is, whether it is stateful."""

    op: str
    path: str
    start: int  # offset of `REGISTER_OP`
    head_end: int  # offset just after `REGISTER_OP("Name")`
    end: int  # offset of the `;` that ends the chain
    stateful: bool


def _chain_end(text: str, start: int) -> int:
    """The offset of the `;` that ends the statement starting at `start`, outside brackets,
    strings and comments (a shape function's body holds `;`s of its own)."""
    depth, k, n = 0, start, len(text)
    while k < n:
        c = text[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == '"' or c == "'":
            k += 1
            while k < n and text[k] != c:
                k += 2 if text[k] == "\\" else 1
        elif text.startswith("//", k):
            k = text.find("\n", k)
            if k < 0:
                return n
        elif text.startswith("/*", k):
            k = text.find("*/", k + 2)
            if k < 0:
                return n
            k += 1
        elif c == ";" and depth == 0:
            return k
        k += 1
    return n


def read_source(path: str) -> str:
    """The text of a C++ source; UsageError, one line naming the file, where it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: cannot read: not UTF-8 text") from None


def chains_in(text: str, path: str = "<source>") -> list[Chain]:
    """Every `REGISTER_OP` chain of `text`, in order."""
    found = []
    for match in _REGISTER_OP.finditer(text):
        end = _chain_end(text, match.end())
        found.append(Chain(match["name"], path, match.start(), match.end(), end,
                           bool(_STATEFUL.search(text, match.end(), end))))
    return found


def with_stateful(text: str, ops) -> tuple[str, list[str]]:
    """`text` with `.SetIsStateful()` added to the chain of each op in `ops` that lacks it,
    and the ops changed. The call goes right after `REGISTER_OP("Name")`, on a line of its
    own indented as the chain's next line when the chain is laid out one call a line (as
    TF's own registrations are), else inline: the chain's formatting is kept. Idempotent."""
    wanted = set(ops)
    changed = []
    out, at = [], 0
    for chain in chains_in(text):
        if chain.op not in wanted or chain.stateful:
            continue
        rest = text[chain.head_end:chain.end]
        layout = re.match(r"(\s*\n([ \t]*))\.", rest)
        insert = (f"{layout.group(1)}.SetIsStateful()" if layout else ".SetIsStateful()")
        out.append(text[at:chain.head_end])
        out.append(insert)
        at = chain.head_end
        changed.append(chain.op)
    out.append(text[at:])
    return "".join(out), changed


_LIBRARY_READER = """
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api

def registered():  # every op of TF's registry, as TF_GetAllOpList serializes it
    ops = op_def_pb2.OpList()
    ops.ParseFromString(c_api.TF_GetBuffer(c_api.TF_GetAllOpList()))
    return {op.name: op for op in ops.op}

before = registered()
try:
    tf.load_op_library(sys.argv[1])
except Exception as exc:  # (tf.errors.NotFoundError: a missing symbol, a wrong file)
    print(json.dumps({"error": str(exc), "kind": type(exc).__name__}))
    sys.exit(0)
print(json.dumps({"ops": {name: {"stateful": op.is_stateful}
                          for name, op in registered().items() if name not in before}}))
"""


def library_ops(path: str) -> dict[str, bool]:
    """Op name -> is_stateful, for each op the library at `path` registers: what TF's own
    loader reads from it (`tf.load_op_library` ... `OP_LIST`), in a child process. UsageError,
    one line naming the file, where it cannot be read or loaded (`graphfix.tf_runtime`)."""
    stat = op_library_stat(path, UsageError)
    require_tensorflow(f"reading the custom-op library {path}", UsageError)
    return _library_ops(os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


@cache
def _library_ops(path: str, mtime_ns: int, size: int) -> dict[str, bool]:
    import subprocess  # (only where a library is read: the graph path's start-up skips it)

    done = subprocess.run([sys.executable, "-c", _LIBRARY_READER, path],
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise op_library_refused(path, last, f"exit {done.returncode}", UsageError)
    answer = json.loads(lines[-1])
    if "error" in answer:
        raise op_library_refused(path, answer["error"], answer["kind"], UsageError)
    return {name: op["stateful"] for name, op in answer["ops"].items()}
