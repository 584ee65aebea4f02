"""The TF runtime: whether this environment has one, and imported and asked for GPUs without
the lines its log level misses.

TensorFlow is no dependency of graphfix's base install: check and fix of graphs and sources
need none. What runs a graph or a script (verify, trace, `check --trace`, `fix --verify`,
`--logdir`, reading a custom-op library) asks `require_tensorflow` first, which finds TF
without importing it and, where there is none, says in one line what to install.

Loading TF's C++ libraries writes to stderr before TF applies `TF_CPP_MIN_LOG_LEVEL`:
absl's "WARNING: All log messages before absl::InitializeLog() is called are written to
STDERR" and, on a machine with no GPU, "I0000 ... cudart_stub.cc:31] Could not find cuda
drivers on your machine" (twice: two libraries load the stub). `import_runtime` hides the
lines of the severities that level hides (graphfix sets 2, INFO and WARNING, unless the user
set it). Asking for GPUs where there is no CUDA driver logs an error ("failed call to
cuInit") that only says there is no GPU, which verify reports in its own words:
`physical_gpus` hides that one when it finds none. Every other line is shown, and all of
them if the call fails.

Custom-op libraries (`tf.load_op_library`'s `.so` files), which check reads and verify loads:
one that cannot be read or that TF's loader refuses is said here, in one line naming it
(`op_library_stat`, `op_library_refused`), as the caller's usage error (exit 2).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import sys

INSTALL_TENSORFLOW = "pip install 'graphfix[verify]' (or tensorflow-cpu / tensorflow-macos)"

_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"
_LOG_LINE = re.compile(r"([IWEF])\d{4} ")  # glog's form: severity, month, day, ...


def tensorflow_installed() -> bool:
    """Whether `import tensorflow` would find TensorFlow, answered without importing it:
    every distribution of TF (tensorflow, tensorflow-cpu, tensorflow-macos, the nightlies)
    installs the same `tensorflow` package."""
    if "tensorflow" in sys.modules:  # (imported already, or being imported)
        return True
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return False
    return spec is not None and bool(spec.submodule_search_locations)


def require_tensorflow(what: str, error: type[Exception]) -> None:
    """Nothing where TensorFlow is installed; else `error` (the caller's one-line usage
    error), saying that `what` (`graphfix verify`, `--logdir`) needs it and how to get it."""
    if not tensorflow_installed():
        raise error(f"{what} needs TensorFlow, which is not installed here: "
                    f"{INSTALL_TENSORFLOW}")


_before_import: list = []


@contextlib.contextmanager
def before_import(call):
    """Within: `call()` runs just before this process imports TF through `import_runtime`
    (the command line diverts there what TF writes to its descriptors,
    `graphfix.cli.foreign_output`)."""
    _before_import.append(call)
    try:
        yield
    finally:
        if call in _before_import:
            _before_import.remove(call)


def import_runtime():
    """`import tensorflow`, quietly as above; the module."""
    while _before_import:
        _before_import.pop(0)()
    if "tensorflow.python" not in sys.modules:  # (once up, there is nothing left to hide)
        hidden = _hidden_severities()
        _quietly(lambda: importlib.import_module("tensorflow"),
                 lambda line: (_severity(line) or "-") in hidden)
    return importlib.import_module("tensorflow")


def op_library_stat(path: str, error: type[Exception]) -> os.stat_result:
    """The stat of the custom-op library at `path`, taken before anything loads it (and
    before TF is imported); `error`, the caller's one-line usage error, naming the file
    where it cannot be read."""
    try:
        return os.stat(path)
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None


def op_library_refused(path: str, said: str, kind: str, error: type[Exception]) -> Exception:
    """`error` for a custom-op library TF's loader refused (a file that is no library, a
    missing symbol): the first line of what it `said`, else the `kind` of error it gave."""
    reason = (said.strip().splitlines() or [kind])[0]
    return error(f"{path}: cannot load as an op library: {reason}")


def load_op_library(path: str, error: type[Exception]):
    """`tf.load_op_library` of the library at `path` (its ops registered in this process),
    the module it gives; `op_library_refused` where TF refuses it."""
    tf = import_runtime()
    try:
        return tf.load_op_library(os.path.abspath(path))
    except Exception as exc:  # (tf.errors.NotFoundError: a missing symbol, not a library)
        raise op_library_refused(path, str(exc), type(exc).__name__, error) from None


def physical_gpus() -> list:
    """TF's physical GPU devices, quietly as above."""
    tf = import_runtime()
    found: list = []
    _quietly(lambda: found.extend(tf.config.list_physical_devices("GPU")),
             lambda line: not found and _severity(line) == "E" and "cuInit" in line)
    return found


def _quietly(call, hide) -> None:
    """`call()`, holding back what it writes to stderr, then showing the lines `hide`
    rejects (every line, if `call` raised)."""
    import tempfile  # (here: the graph path's start-up never needs it)

    try:
        sys.stderr.flush()
        captured = tempfile.TemporaryFile()
    except (OSError, ValueError):  # no temporary file: run it as it comes
        call()
        return
    done = False
    with captured:
        try:
            saved = os.dup(2)
        except OSError:  # no stderr to speak of: nothing to hide either
            call()
            return
        os.dup2(captured.fileno(), 2)
        try:
            call()
            done = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode("utf-8", "surrogateescape").splitlines(True)
            shown = [line for line in lines if not (done and hide(line))]
            if shown:  # (to descriptor 2, as TF wrote them: through what the CLI put there)
                try:
                    os.write(2, "".join(shown).encode("utf-8", "surrogateescape"))
                except OSError:  # stderr is gone (a closed pipe): so are they
                    pass


def _hidden_severities() -> str:
    """The severities TF_CPP_MIN_LOG_LEVEL hides: 1 INFO, 2 and WARNING, 3 and ERROR."""
    try:
        level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        level = 0
    return "IWE"[:max(0, min(level, 3))]


def _severity(line: str) -> str | None:
    if line.startswith(_ABSL_PREAMBLE):
        return "W"
    match = _LOG_LINE.match(line)
    return match.group(1) if match else None
