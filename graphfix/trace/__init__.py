"""Trace: build the graph a script builds, by running it, and know the line that made each op.

`trace(SCRIPT)` runs the user's script (this runs the user's code) in a child process
(`graphfix.trace.child`, the one part of a trace that imports the TF runtime) until it
starts training, and gives back a `Trace`: the MetaGraphDef it built, each node's creation
site, each `Session.run` seen. `graphfix.trace.at_sites` turns the graph transforms'
findings on it into findings at those sites. The child runs under a supervisor process
(`graphfix.trace.supervisor`) that ends whatever the script started when the trace ends.
Asked to (`trace(..., verify=...)`), the child verifies a graph that calls the script's
Python functions itself, at the stop point (`Trace.verified`): only its process has them.

Imports: the core and the graph side here; the driver in `at_sites` (the graph path);
verification in `child` only (the verify of a graph that calls Python functions).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Sequence

from graphfix import phases
from graphfix.errors import Error

DEFAULT_TIMEOUT = 300.0  # seconds: a script is stopped if it runs this long before training
PHASES_FILE = "phases.txt"  # the child's phases, a line each as it begins them
# What the child writes when the script ends its process itself: `os._exit(CODE)`'s code and
# line (EXIT_FILE), the stacks at a fatal signal (CRASH_FILE: faulthandler's dump).
EXIT_FILE, CRASH_FILE = "os_exit.json", "crash.txt"
# What the parent asks the child to verify (verify's options, as JSON), and the child's
# verdict (`graphfix.verification.traced.verdict_doc`): see `trace(verify=...)`.
VERIFY_REQUEST_FILE, VERIFIED_FILE = "verify_request.json", "verified.json"
SUPERVISOR_GRACE = 20.0  # seconds the supervisor has to end the script's processes


class TraceError(Error):
    """Why a script gave no graph, in one line (the script raised, never ran a session,
    ended its process itself or by a signal, outlived the timeout, or is not there)."""


class Site:
    """Where the user's code made something: path (as the trace labels it), line, column
    (1-based, of the call on that line, where the file can be read), function."""

    __slots__ = ("path", "line", "col", "function")

    def __init__(self, path: str, line: int, col: int | None, function: str | None):
        self.path, self.line, self.col, self.function = path, line, col, function

    def key(self) -> tuple:
        return (self.path, self.line, self.col)

    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.col or 1}"

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "col": self.col,
                "function": self.function}


class Run:
    """One `Session.run` the script called: what it fetched, the tensors its `feed_dict`
    fed, where it was called, whether it ran (the train op's first run never does), and
    the session it ran in (an index into `Trace.sessions`, None where not known)."""

    __slots__ = ("fetches", "feeds", "site", "executed", "train", "session")

    def __init__(self, fetches: list[str], feeds: list[str], site: Site | None,
                 executed: bool, train: bool = False, session: int | None = None):
        self.fetches, self.feeds, self.site = fetches, feeds, site
        self.executed, self.train, self.session = executed, train, session

    def to_json(self) -> dict:
        return {"fetches": self.fetches, "feeds": self.feeds,
                "site": self.site.to_json() if self.site else None,
                "executed": self.executed, "train": self.train, "session": self.session}


class SessionConfig:
    """A session the script made, with the config TF made it with (the script's own, or
    TF's default where it gave none; not the trace's, which forces soft placement):
    `allow_soft_placement`, where it was made (`site`), and whether it was a session of
    the graph the trace captured (`on_graph`)."""

    __slots__ = ("allow_soft_placement", "site", "on_graph")

    def __init__(self, allow_soft_placement: bool, site: Site | None, on_graph: bool):
        self.allow_soft_placement, self.site, self.on_graph = (
            allow_soft_placement, site, on_graph)

    def to_json(self) -> dict:
        return {"allow_soft_placement": self.allow_soft_placement,
                "site": self.site.to_json() if self.site else None, "graph": self.on_graph}


class Trace:
    """What a traced script built: `meta_graph` (a MetaGraphDef, devices and collections
    kept), `sites` (node name -> `Site`, for the nodes the user's files made), `runs`
    (every `Session.run` seen, in order), `stopped` (why the trace ended, said for a
    person), `script` (the path as given), `feeds` (placeholder tensor name -> the value
    the last run seen fed it: what `verify SCRIPT` feeds), `op_libraries` (the custom-op
    libraries the script loaded with `tf.load_op_library`: absolute paths, in load order),
    `sessions` (every session the script made, with its config: `SessionConfig`). Made from
    the files the child wrote (`meta_bytes`, `trace_doc`: trace.json read, `feeds_bytes`),
    which `files` gives back as they were, and the facts read from them. `verified`: the
    verdict of the verify the child ran itself (`trace(verify=...)`: a graph that calls
    the script's Python functions), as JSON, None where it ran none."""

    def __init__(self, script: str, meta_graph, sites: dict[str, Site], runs: list[Run],
                 stopped: str, meta_bytes: bytes, trace_doc: dict, feeds_bytes: bytes = b"",
                 sessions: list[SessionConfig] | None = None,
                 op_libraries: list[str] | None = None, verified: dict | None = None):
        self.script, self.meta_graph, self.sites, self.runs = script, meta_graph, sites, runs
        self.stopped, self.verified = stopped, verified
        self.sessions = list(sessions or ())
        # (what check reads the ops' registrations from and verify loads before the import)
        self.op_libraries = list(op_libraries or ())
        self._meta_bytes, self._trace_doc, self._feeds_bytes = meta_bytes, trace_doc, feeds_bytes

    @property
    def soft_placement(self) -> bool:
        """Whether TF places the captured graph with soft placement: every session that ran
        it (the train op's run included, which the trace stops before executing) was made
        with `allow_soft_placement=True`. Every one, not only the train op's: a session
        places the whole graph at its first run, whatever it fetches (measured on TF 2.21
        with XLA_CPU standing in for a GPU: a run fetching a plain constant fails on a
        summary elsewhere in the graph that no kernel can place), so one session without
        it fails the script. False where no run is known (`--until` before any run): the
        graph is then checked as a graph file is."""
        ran = {run.session for run in self.runs}
        used = [s for k, s in enumerate(self.sessions) if k in ran and s.on_graph]
        return bool(used) and None not in ran and all(s.allow_soft_placement for s in used)

    @property
    def feeds(self) -> dict:
        """Placeholder tensor name -> the array the script fed it in the last run seen."""
        if not self._feeds_bytes:
            return {}
        import io

        import numpy as np

        with np.load(io.BytesIO(self._feeds_bytes), allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}

    def summary(self) -> str:
        ran = sum(r.executed for r in self.runs)
        soft = "; its sessions allow soft placement" if self.soft_placement else ""
        return (f"{self.script}: traced {len(self.meta_graph.graph_def.node)} node(s), "
                f"{len(self.sites)} made by the script's files; {len(self.runs)} "
                f"Session.run call(s), {ran} run{soft}; stopped: {self.stopped}"
                + (f"; op libraries loaded: {', '.join(self.op_libraries)}"
                   if self.op_libraries else ""))

    def files(self) -> dict[str, bytes]:
        """The files `graphfix trace -o OUT` writes into OUT: `graph.meta` (the
        MetaGraphDef), `trace.json` (sites, runs, sessions and the custom-op libraries the
        script loaded, as the child wrote them), `feeds.npz` (the placeholders' values of
        the last run, where there are any)."""
        files = {"graph.meta": self._meta_bytes,
                 "trace.json": (json.dumps(self._trace_doc, indent=1) + "\n").encode()}
        if self._feeds_bytes:
            files["feeds.npz"] = self._feeds_bytes
        return files


def _check_request(args: Sequence[str], runs: int | None, timeout: float) -> None:
    """UsageError, one line, for what `graphfix trace` refuses on its command line."""
    from graphfix.registry import UsageError

    if isinstance(args, (str, bytes)):
        raise UsageError(f"args must be a list of arguments, not the string {args!r}")
    if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise UsageError(f"runs must be at least 1, not {runs!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            0 < timeout < float("inf")):
        raise UsageError(f"timeout must be a number of seconds above 0, not {timeout!r}")


def trace(path: str | os.PathLike, args: Sequence[str] = (), *, runs: int | None = None,
          until: str | None = None, timeout: float = DEFAULT_TIMEOUT,
          label: str | None = None, verify: dict | None = None) -> Trace:
    """Run the script at `path` (with `sys.argv` = [path, *args], in its own folder, by this
    Python in a child process) until its first run of a train op, `runs` runs, or the line
    `until` ("FILE:LINE"), and return what it built. This runs the user's code.

    TF1 scripts run unchanged on TF 2: in the user's files `import tensorflow` gives
    `tensorflow.compat.v1` with v2 behaviour disabled (unless the file asks for compat
    itself) and `tf.contrib.slim` is `tf_slim`. Sessions run on the CPU with soft
    placement; the graph keeps the devices the script asked for, and `Trace.sessions` the
    config each session asked for (`Trace.soft_placement`). `label` names the script
    in what the trace says (default: `path` as given).

    `verify`: the options of `graphfix.verification.traced.verify_trace` (JSON: `label`,
    `steps`, `fetches`, `target_devices`, `op_libraries`), for a graph that calls Python
    functions (`tf.py_func`, `tf.numpy_function`), which runs only where they exist: the
    child verifies such a graph itself, at the stop point, and `Trace.verified` holds its
    verdict (the trace's `timeout` counts that time too). Any other graph is verified by
    the caller, from what was captured, as a graph file is.

    Nothing the script starts outlives the trace: a forked child, a daemon, a double fork's
    grandchild are killed when it ends, as it ends (`graphfix.trace.supervisor`: on Linux a
    child subreaper finds them all; elsewhere the script's process group is killed, and a
    process that left it is not found). SIGTERM and SIGHUP (where no handler is set, in the
    main thread) raise SystemExit(128 + the signal) here, as Ctrl-C raises
    KeyboardInterrupt: the script's processes are ended and the temporary folder removed
    first.

    Raises:
        UsageError: `args` a string, `runs` under 1, `timeout` not above 0 (what the
            command line refuses).
        TraceError: one line, when there is no graph: the script raised (where, and what),
            never ran a session, ended its process itself (`os._exit`) or by a signal (the
            code or the signal, and where), or ran longer than `timeout` seconds (where it
            was).
        UsageError: TensorFlow is not installed here (one line: what to install).
    """
    _check_request(args, runs, timeout)
    from graphfix.registry import UsageError
    from graphfix.tf_runtime import require_tensorflow

    require_tensorflow("graphfix.trace", UsageError)
    script, label = Path(path), str(path) if label is None else label
    if not script.is_file():
        raise TraceError(f"{label}: no such script" if not script.exists()
                         else f"{label}: not a file")
    if until is not None and not re.fullmatch(r".+:\d+", until):
        raise TraceError(f"--until must be FILE:LINE, not {until!r}")
    _compiles(script, label)  # (said here: no TF to load for a script that cannot start)
    from graphfix.storage import stopping_signals_deferred, terminate_as_exit

    out = None
    with terminate_as_exit():
        try:
            with stopping_signals_deferred():
                out = tempfile.mkdtemp(prefix="graphfix-trace-")
            if verify is not None:
                Path(out, VERIFY_REQUEST_FILE).write_text(json.dumps(verify))
            _run_child(script, label, list(args), out, runs, until, timeout)
            return read_folder(label, script, Path(out))
        finally:
            if out is not None:
                with stopping_signals_deferred():
                    shutil.rmtree(out, ignore_errors=True)


def _compiles(script: Path, label: str) -> None:
    """TraceError, as the child would say it, if Python cannot compile the script."""
    try:
        compile(script.read_bytes(), str(script), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise TraceError(f"{label}:{exc.lineno}: SyntaxError: {exc.msg} (raised by the "
                         "traced script; nothing written)") from None
    except (OSError, ValueError) as exc:
        raise TraceError(f"{label}: cannot read: {exc}") from None


def _child_environment() -> dict[str, str]:
    """This environment, with the graphfix in use importable by the child, TF quiet, and
    tf.keras as Keras 2 (tf_keras: what TF1 layers and tf_slim need), unless set."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TF_USE_LEGACY_KERAS", "1")
    return env


def _run_child(script: Path, label: str, args: list[str], out: str, runs, until, timeout
               ) -> None:
    """Run the traced child under its supervisor (`graphfix.trace.supervisor`, which ends
    whatever the script started when the child ends, or when this is stopped); TraceError
    where it gave neither a graph nor the script's error."""
    from graphfix.storage import stopping_signals_deferred
    from graphfix.trace.supervisor import ENDED_FILE

    command = [sys.executable, "-m", "graphfix.trace.child", out, str(script.resolve()),
               "" if runs is None else str(runs), until or "", *args]
    with open(os.path.join(out, "output.txt"), "wb") as output:
        with stopping_signals_deferred():  # (known once started, to be stopped)
            supervisor = subprocess.Popen(
                [sys.executable, "-m", "graphfix.trace.supervisor", str(os.getpid()), out,
                 *command], cwd=script.resolve().parent, stdout=output,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=_child_environment(), start_new_session=True)
        try:
            _wait_saying_phases(supervisor, timeout, os.path.join(out, PHASES_FILE))
        except subprocess.TimeoutExpired:
            where = _where_it_was(supervisor, Path(out), script, label)
            raise TraceError(f"{label}: still running after {timeout:g} s (--timeout), "
                             f"stopped{where}; nothing written") from None
        except BaseException:
            _stop(supervisor)
            raise
    if os.path.exists(os.path.join(out, "failure.json")) \
            or os.path.exists(os.path.join(out, "trace.json")):
        return
    try:
        with open(os.path.join(out, ENDED_FILE)) as f:
            returncode = json.load(f)["returncode"]
    except (OSError, ValueError, KeyError):
        returncode = supervisor.returncode  # (the supervisor itself did not end as it does)
    raise TraceError(_ended_early(label, returncode, Path(out), script))


def _wait_saying_phases(child: subprocess.Popen, timeout: float, phases_file: str) -> None:
    """Wait for the child as `child.wait(timeout)` does; meanwhile, where someone listens,
    pass on each phase it writes to `phases_file` as it comes."""
    if not phases.listened():
        child.wait(timeout)
        return
    deadline, said = time.monotonic() + timeout, 0
    while True:
        try:
            child.wait(min(0.2, max(0.0, deadline - time.monotonic())))
            done = True
        except subprocess.TimeoutExpired:
            done = False
        try:
            with open(phases_file) as f:
                lines = f.read().split("\n")[:-1]  # (a line being written has no newline yet)
        except FileNotFoundError:
            lines = []
        for line in lines[said:]:
            phases.phase(line)
        said = len(lines)
        if done:
            return
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(child.args, timeout)


def _stop(supervisor: subprocess.Popen) -> None:
    """Have the supervisor end the child and whatever the script started, and wait for it
    (its whole group is killed if it does not end in SUPERVISOR_GRACE seconds)."""
    from graphfix.storage import stopping_signals_deferred

    with stopping_signals_deferred():  # (a second Ctrl-C does not leave the tree running)
        try:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(SUPERVISOR_GRACE)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(supervisor.pid, signal.SIGKILL)
            except OSError:
                pass
            supervisor.wait()


def _where_it_was(supervisor: subprocess.Popen, out: Path, script: Path, script_label: str
                  ) -> str:
    """' at FILE:LINE in FUNCTION': the innermost frame in the user's files of the child's
    main thread, asked of it (faulthandler, on SIGUSR1, which the supervisor passes on)
    before it is stopped."""
    try:
        supervisor.send_signal(signal.SIGUSR1)
    except OSError:
        pass
    # (faulthandler writes the dump at once; a moment more lets the file be complete)
    deadline, text = time.monotonic() + 5, ""
    while time.monotonic() < deadline and "File " not in text:
        time.sleep(0.2)
        try:
            text = (out / "stack.txt").read_text(errors="replace")
        except OSError:
            text = ""
    _stop(supervisor)
    if not (out / "started.json").exists():
        return " before the script started (TensorFlow was still loading)"
    return _where_in_dump(text, out, script, script_label)


def _where_in_dump(dump: str, out: Path, script: Path, script_label: str) -> str:
    """' at FILE:LINE in FUNCTION' of the innermost user frame of the main thread in a
    faulthandler dump written by the child in `out`, or ''."""
    try:
        main = json.loads((out / "main_thread.json").read_text())["ident"]
    except (OSError, ValueError, KeyError):
        main = None
    from graphfix.trace.user_files import UserFiles

    files = UserFiles()
    for filename, line, function in _main_thread_frames(dump, main):  # (innermost first)
        real = files.real(filename)
        if real is not None:
            where = _label(real, os.path.realpath(script), script_label)
            return f" at {where}:{line} in {function}"
    return ""


def _ended_early(label: str, returncode: int, out: Path, script: Path) -> str:
    """What ended the child before it wrote a graph or the script's error (a signal, an exit
    past Python's, `os._exit`), and where the script was, as far as known: the line that
    called `os._exit` or was running at a fatal signal (the child records both), else the
    last Session.run the trace saw."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        what = f"was killed by {name}"
    else:
        what = f"ended its process with exit code {returncode}"
    where = ""
    try:
        called = json.loads((out / EXIT_FILE).read_text())
    except (OSError, ValueError):
        called = None
    if called is not None and returncode == called.get("code"):
        what = f"called os._exit({called['code']})"
        if called.get("site"):
            real, line, function = called["site"]
            where = (f" at {_label(real, os.path.realpath(script), label)}:{line} "
                     f"in {function}")
    else:
        try:
            dump = (out / CRASH_FILE).read_text(errors="replace")
        except OSError:
            dump = ""
        where = _where_in_dump(dump, out, script, label)
    if not where:
        where = _last_phase(out)
    said = f"{label}: the traced script {what}{where}, before the trace could write the graph"
    if returncode == -signal.SIGABRT:  # (a failed C++ CHECK: its message is the last line)
        said += f"; its last output: {_last_line(str(out))}"
    return said + "; nothing written"


def _last_phase(out: Path) -> str:
    """' after session run N at FILE:LINE' (the last the child began), or where it was
    before any run."""
    if not (out / "started.json").exists():
        return " before the script started (TensorFlow was still loading)"
    try:
        phases_said = (out / PHASES_FILE).read_text(errors="replace").splitlines()
    except OSError:
        phases_said = []
    runs = [line for line in phases_said if line.startswith("session run ")]
    return f" after {runs[-1]}" if runs else " before its first Session.run"


def _main_thread_frames(dump: str, ident: int | None) -> list[tuple[str, int, str]]:
    """(file, line, function) of the main thread's stack in a faulthandler dump,
    innermost first."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump)
    chosen = blocks[0] if blocks else ""
    for block in blocks:
        head = re.match(r"(?:Current thread|Thread) (0x[0-9a-f]+)", block)
        if head and ident is not None and int(head.group(1), 16) == ident:
            chosen = block
    return [(m.group(1), int(m.group(2)), m.group(3))
            for m in re.finditer(r'File "(.+?)", line (\d+) in (\S+)', chosen)]


def _last_line(out: str) -> str:
    try:
        lines = Path(out, "output.txt").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no output)"
    return lines[-1] if lines else "(no output)"


def _label(real: str, script_real: str | None, script_label: str | None) -> str:
    """How a user's file is named in findings: the script as given, else relative to the
    working directory where it lies beneath it, else its real path."""
    if script_real is not None and real == script_real:
        return script_label
    try:
        return os.path.relpath(real) if not os.path.relpath(real).startswith("..") else real
    except ValueError:
        return real


class _Columns:
    """The column of the first call on a line of a file (1-based), read with `ast` once
    per file; None where the file cannot be parsed or the line has no call."""

    def __init__(self):
        self.files: dict[str, dict[int, int]] = {}

    def of(self, path: str, line: int) -> int | None:
        if path not in self.files:
            import ast

            columns: dict[int, int] = {}
            try:
                tree = ast.parse(Path(path).read_bytes())
            except (OSError, SyntaxError, ValueError):
                tree = None
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Call):
                    known = columns.get(node.lineno)
                    if known is None or node.col_offset < known:
                        columns[node.lineno] = node.col_offset
            self.files[path] = columns
        col = self.files[path].get(line)
        return None if col is None else col + 1


def read_folder(label: str, script: Path, out: Path) -> Trace:
    """The `Trace` of `script` (named `label`) from the files its child wrote into `out`;
    TraceError where the child wrote why there is none (`failure.json`)."""
    script_real = os.path.realpath(script)
    columns = _Columns()

    def site_of(raw) -> Site | None:
        if not raw:
            return None
        real, line, function = raw
        return Site(_label(real, script_real, label), line, columns.of(real, line) if line
                    else None, function)

    failure = out / "failure.json"
    if failure.exists():
        doc = json.loads(failure.read_text())
        if doc["kind"] == "no_session":
            raise TraceError(f"{label}: {doc['message']}; nothing written")
        where = site_of(doc.get("site"))
        at = f"{where.path}:{where.line}" if where else label
        raise TraceError(f"{at}: {doc['message']} (raised by the traced script; nothing "
                         "written)")
    from graphfix.graph import proto

    meta_bytes = (out / "graph.meta").read_bytes()
    meta = proto.MetaGraphDef.FromString(meta_bytes)
    doc = json.loads((out / "trace.json").read_text())
    sites = {name: site_of(raw) for name, raw in doc["sites"].items()}
    runs = [Run(r["fetches"], r["feeds"], site_of(r["site"]), r["executed"],
                r.get("train", False), r.get("session")) for r in doc["runs"]]
    sessions = [SessionConfig(s["allow_soft_placement"], site_of(s["site"]), s["graph"])
                for s in doc.get("sessions", ())]
    feeds, verified = out / "feeds.npz", out / VERIFIED_FILE
    return Trace(label, meta, sites, runs, doc["stop"]["said"], meta_bytes, doc,
                 feeds.read_bytes() if feeds.exists() else b"", sessions,
                 doc.get("op_libraries", []),
                 json.loads(verified.read_text()) if verified.exists() else None)


class _CallablePackage(types.ModuleType):
    """This package, callable: `graphfix.trace(path, ...)` is `graphfix.trace.trace` (the
    issue's API name is the package's name, and a package binds its name in `graphfix`
    when it is imported)."""

    def __call__(self, *args, **kwargs) -> Trace:
        return trace(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
