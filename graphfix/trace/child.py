"""The traced side of `graphfix trace`: run as `python -m graphfix.trace.child OUT SCRIPT
RUNS UNTIL [ARGS...]` (RUNS and UNTIL empty where not given) in a process of its own, it runs the user's script as `python SCRIPT ARGS` would,
with TensorFlow hooked, and writes what the script built into the folder OUT:

- `graph.meta`: the graph as a MetaGraphDef (devices and collections kept);
- `trace.json`: every node's creation site, every `Session.run` seen, why it stopped, the
  custom-op libraries the script loaded (`op_libraries`: absolute paths, in load order);
- `feeds.npz`: the values the last run seen fed its placeholders (what `verify SCRIPT`
  feeds the graph, instead of synthetic values), where they are arrays of numbers, bools or
  bytes and FEEDS_KEPT_BYTES at most in all;
- or `failure.json` instead: why nothing was captured (the script raised, never ran a
  session);
- `verified.json`, where the parent asked for a verify (`verify_request.json`) and the graph
  calls Python functions: the verdict of verify run here, at the stop point
  (`Tracer.verify_if_asked`).

This is the only part of graphfix that imports the TF runtime for a trace; the parent reads
what it wrote without it (`graphfix.trace`). Runs before the stop point execute on the CPU
with soft placement, so a script whose graph cannot be placed on the devices it names still
goes on; the first run of a train op is never executed (see `_is_training`). What each
session asked for itself (`allow_soft_placement`) is recorded in `trace.json`'s `sessions`
(`Tracer.on_session`), each run naming its session.
"""

from __future__ import annotations

import builtins
import faulthandler
import importlib
import importlib.abc
import importlib.util
import json
import os
import re
import runpy
import signal
import sys
import threading
import traceback
import types

from graphfix.graph.training import FEEDABLE_OPS
from graphfix.trace import (CRASH_FILE, EXIT_FILE, PHASES_FILE, VERIFIED_FILE,
                            VERIFY_REQUEST_FILE)
from graphfix.trace.user_files import UserFiles

_ASKS_FOR_COMPAT = re.compile(r"import\s+tensorflow\.compat\.v1|from\s+tensorflow\.compat"
                              r"(\.v1)?\s+import|disable_v2_behavior|disable_eager_execution")


def asks_for_compat(text: str) -> bool:
    """Whether a script imports TF's compat API itself, or turns v2 behaviour off itself: then
    its `import tensorflow` is kept as it is, v2 behaviour and all; otherwise a trace runs it
    as TF1 (`tf.compat.v1.X` alone does not count: TF 1.13+ has it too)."""
    return bool(_ASKS_FOR_COMPAT.search(text))

# The kernels optimizers apply gradients with (TF's training_ops: ApplyAdam,
# ResourceApplyGradientDescent, SparseApplyMomentum, ...).
_TRAINING_OP_TYPE = re.compile(r"(Resource)?(Sparse)?Apply[A-Z]\w*")
# A batch of images of a real script is tens of MiB; past this the feeds are not kept (a
# trace's folder stays small) and verify feeds synthetic values, as for a graph file.
FEEDS_KEPT_BYTES = 256 << 20


class StopTrace(BaseException):
    """Raised in the script where the trace stops (not an Exception: the script's own
    `except Exception` must not swallow it)."""


class Tracer:
    """The hooks and what they saw."""

    def __init__(self, out: str, runs: int | None, until: str | None, script: str = ""):
        self.out, self.max_runs, self.until, self.script = out, runs, until, script
        self.files = UserFiles()
        self.runs: list[dict] = []
        self.graph = None  # the graph of the last session run
        self.feed_dict = None  # the last session run's (as given: read only at the stop)
        self.answered: dict[tuple, bool] = {}  # `_is_training`'s, while the graph is as it was
        self.tf = None
        self.op_libraries: list[str] = []  # what `tf.load_op_library` loaded (`_hook_op_libraries`)
        self.sessions: list[dict] = []  # each session's config as TF uses it (`on_session`)
        self.session_graphs: list = []  # (the graph of each, in the same order)
        self.pid = os.getpid()  # (a process the script forks runs on without writing)
        # While verify runs here (`verify_if_asked`), its sessions are its own: not the
        # script's, not recorded, their config as verify made it.
        self.verifying = False

    # -- set-up -----------------------------------------------------------------------
    def install(self, compat: bool) -> None:
        """Import TF and hook it: sessions, and (unless the script asks for compat itself)
        `import tensorflow` in the user's files."""
        alias_legacy_tf_layers()
        import tensorflow as tf
        from tensorflow.python.client import session

        self.tf = tf
        v1 = tf.compat.v1
        if not compat:
            v1.disable_v2_behavior()
            v1.contrib = _contrib_module()
            sys.modules.setdefault("tensorflow.contrib", v1.contrib)
            sys.meta_path.insert(0, SlimAlias())
            self._redirect_imports(v1)
        original_init, original_run = session.BaseSession.__init__, session.BaseSession.run
        tracer = self

        def __init__(self, target="", graph=None, config=None):
            if tracer.verifying:
                return original_init(self, target, graph, config)
            tracer.on_session(self, graph, config)
            original_init(self, target, graph, tracer.on_cpu(config))

        def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
            if tracer.verifying:
                return original_run(self, fetches, feed_dict, options, run_metadata)
            tracer.before_run(self, fetches, feed_dict)
            result = original_run(self, fetches, feed_dict, options, run_metadata)
            tracer.after_run()
            return result

        session.BaseSession.__init__ = __init__
        session.BaseSession.run = run
        self._hook_op_libraries(tf)
        if self.until:
            self._stop_at_line()

    def _hook_op_libraries(self, tf) -> None:
        """Record each custom-op library the script loads (`tf.load_op_library`, as
        `tf.compat.v1.load_op_library` and `load_library.load_op_library` too): its absolute
        path, once, when it loaded (what check and verify need to read and import the graph)."""
        from tensorflow.python.framework import load_library

        original = load_library.load_op_library
        loaded = self.op_libraries

        def load_op_library(library_filename):
            module = original(library_filename)
            path = os.path.abspath(os.fspath(library_filename))
            if path not in loaded:
                loaded.append(path)
            return module

        load_op_library.__doc__ = original.__doc__
        for owner in (load_library, tf, tf.compat.v1):
            if getattr(owner, "load_op_library", None) is original:
                setattr(owner, "load_op_library", load_op_library)

    def on_session(self, session, graph, config) -> None:
        """Record the config a session was made with as TF would use it (none given: TF's
        global default, `context.config`, as `BaseSession` takes it), before the trace
        forces soft placement (`on_cpu`): every session passes here, whoever makes it
        (`tf.Session`, `MonitoredTrainingSession`, `Supervisor`, an Estimator's RunConfig)."""
        if config is None:
            from tensorflow.python.eager import context

            config = context.context().config
        self.sessions.append({
            "allow_soft_placement": bool(getattr(config, "allow_soft_placement", False)),
            "site": self.files.innermost(traceback.extract_stack())})
        self.session_graphs.append(graph if graph is not None
                                   else self.tf.compat.v1.get_default_graph())
        session._graphfix_session = len(self.sessions) - 1

    def on_cpu(self, config):
        """A session's config with soft placement and no GPU: whatever devices the graph
        names, its runs go on the CPU."""
        from tensorflow.core.protobuf import config_pb2

        copy = config_pb2.ConfigProto()
        if config is not None:
            copy.CopyFrom(config)
        copy.allow_soft_placement = True
        copy.device_count["GPU"] = 0
        return copy

    def _redirect_imports(self, v1) -> None:
        original = builtins.__import__
        files = self.files
        asks: dict[str, bool] = {}

        def tf1_file(filename) -> bool:
            real = files.real(filename)
            if real is None:
                return False
            if real not in asks:
                try:
                    with open(real, encoding="utf-8", errors="replace") as f:
                        asks[real] = asks_for_compat(f.read())
                except OSError:
                    asks[real] = True
            return not asks[real]

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):
            module = original(name, globals, locals, fromlist, level)
            if (level == 0 and globals and (name == "tensorflow" or (
                    not fromlist and name.startswith("tensorflow.contrib")))
                    and tf1_file(globals.get("__file__"))):
                return v1
            return module

        builtins.__import__ = __import__

    def _stop_at_line(self) -> None:
        """Stop when the script reaches `--until FILE:LINE` (before that line runs)."""
        path, _, line = self.until.rpartition(":")
        line = int(line)
        wanted = os.path.realpath(path)
        tail = os.sep + os.path.normpath(path).lstrip(os.sep + ".")

        def matches(filename: str) -> bool:
            real = self.files.real(filename)
            return real is not None and (real == wanted or real.endswith(tail))

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == line:
                self.stop("until", f"reached {self.until}")
            return local

        def calls(frame, event, arg):
            return local if matches(frame.f_code.co_filename) else None

        threading.settrace(calls)
        sys.settrace(calls)

    # -- the runs ---------------------------------------------------------------------
    def before_run(self, session, fetches, feed_dict) -> None:
        graph = session.graph
        self.graph, self.feed_dict = graph, feed_dict
        names = [_name(f) for f in _flat(self.tf, fetches)]
        feeds = [_name(k) for k in _flat(self.tf, list((feed_dict or {}).keys()))]
        site = self.files.innermost(traceback.extract_stack())
        record = {"fetches": names, "feeds": feeds, "site": site, "executed": False,
                  "session": getattr(session, "_graphfix_session", None)}
        self.runs.append(record)
        where = f" at {os.path.basename(site[0])}:{site[1]}" if site else ""
        _phase(self.out, f"session run {len(self.runs)}{where}")
        if self._is_training(graph, fetches):
            record["train"] = True
            self.stop("train_op", "the first run of a train op (not run)")

    def after_run(self) -> None:
        self.runs[-1]["executed"] = True
        if self.max_runs is not None and len(self.runs) >= self.max_runs:
            self.stop("runs", f"after {len(self.runs)} run(s) (--runs)")

    def _is_training(self, graph, fetches) -> bool:
        """Whether the run's fetches reach a train op: an op of the TRAIN_OP collection
        (where TF's optimizers put what `minimize`/`apply_gradients` return), or one of
        TF's gradient-applying kernels, through data or control inputs."""
        tf = self.tf
        marked = set()
        for item in graph.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP):
            marked.add(getattr(item, "op", item))
        todo = []
        for fetch in _flat(tf, fetches):
            try:
                element = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
            except (TypeError, ValueError, KeyError):
                continue
            todo.append(getattr(element, "op", element))
        # (a loop running the same fetches before it trains walks the graph once)
        key = (id(graph), graph.version, len(marked), tuple(op.name for op in todo))
        if key not in self.answered:
            self.answered[key] = self._reaches(todo, marked)
        return self.answered[key]

    @staticmethod
    def _reaches(todo: list, marked: set) -> bool:
        seen = set()
        while todo:
            op = todo.pop()
            if op in seen:
                continue
            seen.add(op)
            if op in marked or _TRAINING_OP_TYPE.fullmatch(op.type):
                return True
            todo.extend(t.op for t in op.inputs)
            todo.extend(op.control_inputs)
        return False

    # -- the end ----------------------------------------------------------------------
    def stop(self, reason: str, said: str) -> None:
        sys.settrace(None)
        threading.settrace(None)
        self.verify_if_asked(self.write(reason, said))
        raise StopTrace(reason)

    def write(self, reason: str, said: str):
        """Write what the trace saw into the folder (the module docstring's files); the
        MetaGraphDef written, None where there is no graph (or this is a forked process)."""
        if os.getpid() != self.pid:
            return None
        tf = self.tf
        graph = self.graph if self.graph is not None else (
            tf.compat.v1.get_default_graph() if reason == "until" else None)
        if graph is None:
            _write_json(self.out, "failure.json", {
                "kind": "no_session", "message": "the script never ran a session "
                "(tf.Session.run): there is no graph to check (give --until FILE:LINE "
                "to capture the graph built by then)"})
            return None
        meta = tf.compat.v1.train.export_meta_graph(graph=graph, clear_devices=False)
        with open(os.path.join(self.out, "graph.meta"), "wb") as f:
            f.write(meta.SerializeToString(deterministic=True))
        sites = {}
        for op in graph.get_operations():
            site = self.files.innermost(op.traceback)
            if site is not None:
                sites[op.name] = site
        feeds, not_kept = _placeholder_feeds(graph, self.feed_dict)
        if feeds:
            import numpy as np

            np.savez(os.path.join(self.out, "feeds.npz"), **feeds)
        sessions = [dict(record, graph=on is graph)  # (whether it placed the graph captured)
                    for record, on in zip(self.sessions, self.session_graphs)]
        _write_json(self.out, "trace.json", {"sites": sites, "runs": self.runs,
                                             "sessions": sessions,
                                             "stop": {"reason": reason, "said": said},
                                             "feeds_kept": sorted(feeds),
                                             "feeds_not_kept": not_kept,
                                             "op_libraries": self.op_libraries})
        return meta

    def verify_if_asked(self, meta) -> None:
        """Where the parent asked for a verify (VERIFY_REQUEST_FILE: its options) and the
        graph captured (`meta`, as written; None where none was) calls Python functions (`tf.py_func`, `tf.numpy_function`), verify it
        here, now, and write the verdict (VERIFIED_FILE): TF finds a Python function by the
        token its node names, in a registry of this process, which holds it while the
        script's graph lives; and the script is as it was when it stopped (what its
        functions read is still open). Verify re-imports the graph as written into a fresh
        graph: the tokens are the same.

        Any other graph is verified by the parent from the files written, as a graph file
        is: there it runs apart from the script's process (its threads, the TF settings it
        made, the trace's hooks), and a crash of verify is not taken for the script's."""
        request = os.path.join(self.out, VERIFY_REQUEST_FILE)
        if meta is None or not os.path.exists(request):
            return
        from graphfix.verification.inputs import python_function_nodes

        if not python_function_nodes(meta.graph_def):
            return
        from pathlib import Path

        from graphfix import phases
        from graphfix.registry import verify_checks
        from graphfix.trace import read_folder
        from graphfix.verification.traced import verdict_doc

        captured = read_folder(self.script, Path(self.script), Path(self.out))
        with open(request, encoding="utf-8") as f:
            options = json.load(f)
        self.verifying = True
        try:
            with phases.listening(lambda text: _phase(self.out, f"verify: {text}")):
                verdict = verdict_doc(captured, checks=verify_checks(), **options)
        finally:
            self.verifying = False
        _write_json(self.out, VERIFIED_FILE, verdict)


def _placeholder_feeds(graph, feed_dict) -> tuple[dict, dict[str, str]]:
    """The placeholders' values of a run's `feed_dict` (tensor name -> array), and why each
    other placeholder feed is not kept. Variables fed (feed-to-assign's) are not kept: verify
    feeds placeholders only."""
    import numpy as np

    kept, not_kept = {}, {}
    for key, value in (feed_dict or {}).items():
        try:
            tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except (TypeError, ValueError, KeyError):
            continue  # (a SparseTensor or a feed TF itself would refuse)
        if tensor.op.type not in FEEDABLE_OPS:
            continue
        try:
            array = np.asarray(value)
            if tensor.dtype.is_numpy_compatible and tensor.dtype.as_numpy_dtype is not object:
                array = array.astype(tensor.dtype.as_numpy_dtype, copy=False)
            elif array.dtype.kind in "OU":
                array = array.astype(bytes)
        except (TypeError, ValueError) as exc:
            not_kept[tensor.name] = f"not an array ({exc})"
            continue
        if array.dtype.kind not in "biufcS":
            not_kept[tensor.name] = f"an array of {array.dtype}"
            continue
        kept[tensor.name] = array
    if sum(a.nbytes for a in kept.values()) > FEEDS_KEPT_BYTES:
        return {}, {name: f"the run's feeds are over {FEEDS_KEPT_BYTES >> 20} MiB"
                    for name in kept} | not_kept
    return kept, not_kept


def _flat(tf, structure) -> list:
    from tensorflow.python.util import nest

    try:
        return nest.flatten(structure)
    except (TypeError, ValueError):
        return [structure]


def _name(item) -> str:
    name = getattr(item, "name", None)
    return name if isinstance(name, str) else str(item)


def _write_json(out: str, name: str, doc: dict) -> None:
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(doc, f)


# Where the parts of tf.contrib that TF1 training scripts use most live on: tf_slim is
# what TF extracted contrib's layers, framework (arg_scope, variables) and slim into; the
# RNN cells went into compat.v1's nn. A name is looked up in each module in turn.
CONTRIB_HOMES = {
    "layers": ("tf_slim.layers", "tf_slim"),  # (initializers and regularizers: tf_slim's)
    "framework": ("tf_slim",),
    "rnn": ("tensorflow.compat.v1.nn.rnn_cell", "tensorflow.compat.v1.nn"),
}


def _contrib_module() -> types.ModuleType:
    """`tf.contrib` as TF 2 has it: gone, but for `slim`, which is `tf_slim` where that is
    installed (`SlimAlias` makes `import tensorflow.contrib.slim...` find it), and the parts
    CONTRIB_HOMES says where they went."""

    class Contrib(types.ModuleType):
        def __getattr__(self, name: str):
            if name.startswith("__"):
                raise AttributeError(name)
            if name == "slim":
                try:
                    return importlib.import_module(SlimAlias.ALIAS)
                except ImportError:
                    raise AttributeError("tf.contrib.slim needs tf_slim, which is not "
                                         "installed") from None
            if name in CONTRIB_HOMES:
                part = _contrib_part(name)
                setattr(self, name, part)
                return part
            raise AttributeError(f"tf.contrib.{name} was removed in TensorFlow 2 (of "
                                 "tf.contrib, a trace has slim as tf_slim, and "
                                 f"{', '.join(sorted(CONTRIB_HOMES))} where they went)")

    contrib = Contrib("tensorflow.contrib")
    contrib.__path__ = []  # (a package: `tensorflow.contrib.slim` is imported beneath it)
    return contrib


def _contrib_part(name: str) -> types.ModuleType:
    """`tf.contrib.NAME` as a module whose attributes are found in its CONTRIB_HOMES."""
    homes = CONTRIB_HOMES[name]

    class Part(types.ModuleType):
        def __getattr__(self, attribute: str):
            if attribute.startswith("__"):
                raise AttributeError(attribute)
            for home in homes:
                try:
                    module = importlib.import_module(home)
                except ImportError:
                    continue
                if hasattr(module, attribute):
                    return getattr(module, attribute)
            raise AttributeError(f"tf.contrib.{name}.{attribute} was removed in TensorFlow 2 "
                                 f"(not in {' or '.join(homes)}, where tf.contrib.{name} went)")

    part = Part(f"tensorflow.contrib.{name}")
    sys.modules.setdefault(part.__name__, part)
    return part


class SlimAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`tensorflow.contrib.slim` and its modules are `tf_slim`'s, the same module objects
    (imported once, whatever name the script uses)."""

    ALIAS, REAL = "tensorflow.contrib.slim", "tf_slim"

    def __init__(self):
        self.specs: dict[str, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.ALIAS and not fullname.startswith(self.ALIAS + "."):
            return None
        real = self.REAL + fullname[len(self.ALIAS):]
        try:
            found = importlib.util.find_spec(real)
        except ImportError:
            return None
        if found is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, self, is_package=found.submodule_search_locations is not None)

    def create_module(self, spec):
        module = importlib.import_module(self.REAL + spec.name[len(self.ALIAS):])
        self.specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # (the import system gave the module the alias's spec: it keeps its own)
        module.__spec__ = self.specs.pop(module.__spec__.name)


def alias_legacy_tf_layers() -> None:
    """tf_slim under TF 2.16+: TF's `tensorflow/python/layers` shims import
    `tf_keras.legacy_tf_layers`, which tf_keras ships as `tf_keras.src.legacy_tf_layers`;
    the package and its modules are aliased under the name TF imports (nothing if tf_keras
    is absent or already has it)."""
    import pkgutil

    alias, real = "tf_keras.legacy_tf_layers", "tf_keras.src.legacy_tf_layers"
    try:
        if importlib.util.find_spec("tf_keras") is None or importlib.util.find_spec(alias):
            return
    except ImportError:
        pass
    try:
        package = importlib.import_module(real)
    except ImportError:
        return
    sys.modules[alias] = package
    for info in pkgutil.iter_modules(package.__path__):
        sub = importlib.import_module(f"{real}.{info.name}")
        sys.modules[f"{alias}.{info.name}"] = sub
        setattr(package, info.name, sub)
    sys.modules["tf_keras"].legacy_tf_layers = package


def _failure(out: str, files: UserFiles, exc: BaseException) -> None:
    """failure.json for an exception the script raised: where, in the user's files, and
    what."""
    frames = traceback.extract_tb(exc.__traceback__)
    site = files.innermost(frames)
    if isinstance(exc, SyntaxError) and exc.filename:
        site = [os.path.realpath(exc.filename), exc.lineno, None]
    _write_json(out, "failure.json", {"kind": "raised", "site": site,
                                      "message": f"{type(exc).__name__}: {_what_failed(exc)}"
                                      if str(exc).strip() else type(exc).__name__})


def _what_failed(exc: BaseException) -> str:
    """An exception's message in one line: its first, but for TF's error from a run, whose
    first line is "Graph execution error:": the line that says what failed (after the
    `Node: 'NAME'` line where TF says where the node was defined, with the node), else the
    first line after it that is not TF's "Detected at ..." or a stack frame."""
    lines = str(exc).strip().splitlines()
    if not lines[0].startswith("Graph execution error"):
        return lines[0]
    rest = [line.strip() for line in lines[1:] if line.strip()]
    for line, after in zip(rest, rest[1:]):
        if line.startswith("Node: "):
            return f"{after} (node {line[len('Node: '):].strip(chr(39))})"
    return next((line for line in rest if not line.startswith(("Detected ", "File "))),
                lines[0])


def _phase(out: str, text: str) -> None:
    """A phase begins: one line of `phases.txt`, which the parent passes on as it comes
    (`graphfix.trace._run_child`) where someone watches."""
    with open(os.path.join(out, PHASES_FILE), "a") as f:
        f.write(text.replace("\n", " ") + "\n")


def _record_os_exit(out: str, files: UserFiles):
    """Make `os._exit` say, in this process (not in one the script forks), its code and the
    line that called it (EXIT_FILE), which the parent reports: the script ended before the
    trace could. Returns the real `os._exit`."""
    real_exit, traced = os._exit, os.getpid()

    def _exit(code):
        if os.getpid() == traced:
            try:
                _write_json(out, EXIT_FILE, {"code": code, "site": files.innermost(
                    traceback.extract_stack())})
            except Exception:  # (it exits whatever happens)
                pass
        real_exit(code)

    os._exit = _exit
    return real_exit


def main(argv: list[str]) -> None:
    out, script, runs, until, *args = argv
    tracer = Tracer(out, int(runs) if runs else None, until or None, script)
    # --timeout: the parent asks where the script is (SIGUSR1) before it stops it; a fatal
    # signal (SIGSEGV, SIGABRT, ...) leaves the stacks, to say where the script was.
    stack_file = open(os.path.join(out, "stack.txt"), "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    crash_file = open(os.path.join(out, CRASH_FILE), "w")
    faulthandler.enable(file=crash_file, all_threads=True)
    exit_now = _record_os_exit(out, tracer.files)
    _write_json(out, "main_thread.json", {"ident": threading.main_thread().ident})
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        with open(script, "rb") as f:
            compat = asks_for_compat(f.read().decode("utf-8", "replace"))
        _phase(out, "importing TensorFlow")
        tracer.install(compat)
        _write_json(out, "started.json", {})  # (the parent's word for a timeout: where)
        _phase(out, f"running {os.path.basename(script)}")
        runpy.run_path(script, run_name="__main__")
        tracer.stop("ended", "the script ended")
    except StopTrace:
        pass
    except SystemExit as exc:
        if exc.code not in (None, 0) and os.getpid() == tracer.pid:
            _failure(out, tracer.files, exc)
        else:
            try:
                tracer.stop("ended", "the script exited")
            except StopTrace:
                pass
    except BaseException as exc:  # the script's own error, whatever it is
        if os.getpid() == tracer.pid:
            _failure(out, tracer.files, exc)
    sys.stdout.flush()
    sys.stderr.flush()
    # The script's threads (queue runners, coordinators) must not keep the trace alive; a
    # process the script forked that ran on to here writes nothing (`Tracer.write`).
    exit_now(0)


if __name__ == "__main__":
    main(sys.argv[1:])
