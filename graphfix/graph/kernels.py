"""TF's kernel registry: which device types can run a node with its attrs.

The answers come from one source per run (`selected`):

- a table graphfix ships per TensorFlow minor version (`tables/tfX.Y.json`, written by
  tools/gen_kernel_table.py in a venv of that version): the registry of the default
  `tensorflow` wheel for Linux x86-64, which registers its GPU kernels even on a machine with
  no GPU. It answers for an installed TF of that version whatever its distribution (so a
  `tensorflow-cpu` or `tensorflow-macos` user checks GPU placement as the cluster's TF would
  place), for the newest version where no TF is installed, and for the version a run names
  (`tf_version`, the CLI's `--tf-version`: the cluster's TF, not the laptop's). A table is
  read without TF: one op per line, each decoded on first use.
- the installed TF's own registry (importing its runtime costs seconds), for a TF graphfix
  ships no table of (a newer release, a nightly, a release candidate), one that loads kernel
  plug-ins, or where GRAPHFIX_LIVE_KERNELS=1 asks for it. A `tensorflow-cpu` registry has no
  GPU kernels, and we say so rather than pass. With a cache folder (`use_snapshot`), its
  answers for the ops asked are kept there, per TensorFlow install (its version and the size
  and time of its libraries and plug-ins), so the next `check` that asks only about those
  ops does not load TF at all.

The op signatures (`graphfix.graph.signatures`) come from the same table, or from the newest
where the registry answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Iterator

TABLES = Path(__file__).with_name("tables")
# The device types whose kernels the tables keep (graphfix places on CPUs and GPUs).
TABLE_DEVICE_TYPES = ("CPU", "GPU", "DEFAULT")
LIVE_KERNELS_ENV = "GRAPHFIX_LIVE_KERNELS"
TABLE, REGISTRY = "table", "installed registry"  # (`Source.kind`, as JSON output says it)


class NoGpuKernelsError(RuntimeError):
    """Placement cannot be judged: the installed TensorFlow's registry, asked, has no GPU
    kernels, or TensorFlow cannot be imported to ask it."""


class TfVersionError(ValueError):
    """A TensorFlow version graphfix ships no kernel table of (one line, naming those it
    ships)."""


def shipped_versions() -> tuple[str, ...]:
    """The TensorFlow minor versions graphfix has a table of ("2.16", ...), oldest first."""
    return _shipped_versions()


@cache
def _shipped_versions() -> tuple[str, ...]:
    found = [p.name[len("tf"):-len(".json")] for p in TABLES.glob("tf*.json")]
    return tuple(sorted((v for v in found if _MINOR.fullmatch(v)), key=_version_key))


_MINOR = re.compile(r"\d+\.\d+")
# A final release (2.16.2, 2.16.0.post1): its minor version's table answers for it. A
# release candidate or a nightly (2.21.0rc1, 2.22.0.dev20261201) may register other kernels.
_RELEASE = re.compile(r"(\d+\.\d+)(?:\.\d+)*(?:\.post\d+)?")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class _Table:
    """One shipped table: op -> {"in", "out", "stateful", "defaults", "kernels"} (the op's
    signature, `graphfix.graph.signatures`; the defaults of the attrs its arguments and its
    kernels read; its kernels as `_registered_kernels` gives them). Each op's line is
    decoded on first use: a graph uses ~100 of the ~1,900 ops."""

    def __init__(self, path: Path):
        self.path = path
        self._texts: dict[str, str] | None = None
        self._entries: dict[str, dict] = {}

    def _lines(self) -> dict[str, str]:
        if self._texts is None:
            lines = self.path.read_text().splitlines()
            pairs = (line.rstrip(",").partition(":") for line in lines[1:-1])
            # (an op's name is letters, digits and _: its quotes are all there is to strip)
            self._texts = {name[1:-1]: entry for name, _, entry in pairs}
        return self._texts

    def head(self) -> dict:
        """What the table was written from: {"tensorflow": "2.16.2", "platform": ...}."""
        with self.path.open() as lines:
            return json.loads(lines.readline().rstrip().removesuffix(',"ops":{') + "}")

    def __contains__(self, op: object) -> bool:
        return op in self._entries or op in self._lines()

    def entry(self, op: str) -> dict:
        """`op`'s entry (KeyError for an op this TensorFlow does not register)."""
        entry = self._entries.get(op)
        if entry is None:
            entry = self._entries[op] = json.loads(self._lines()[op])
        return entry

    def ops(self) -> list[str]:
        return list(self._lines())


@cache
def _table(version: str) -> _Table:
    return _Table(TABLES / f"tf{version}.json")


class Source:
    """Where this run's placement answers come from: a shipped table (`table` set), or the
    installed TensorFlow's registry (`table` None); `version`, the table's ("2.16") or the
    installed TF's as its distribution says it (None where it says none)."""

    __slots__ = ("version", "table")

    def __init__(self, version: str | None, table: _Table | None):
        self.version = version
        self.table = table

    @property
    def kind(self) -> str:
        return REGISTRY if self.table is None else TABLE

    def to_json(self) -> dict:
        """What JSON output says of it: {"version": "2.16", "source": "table"}."""
        return {"version": self.version, "source": self.kind}

    def describe(self) -> str:
        """One line for `--verbose`."""
        if self.table is not None:
            return f"kernels and op signatures: TensorFlow {self.version}'s table, shipped " \
                   "with graphfix"
        version = f" {self.version}" if self.version else ""
        return f"kernels: the installed TensorFlow{version}'s own registry; op signatures: " \
               f"TensorFlow {shipped_versions()[-1]}'s table, shipped with graphfix"


class _Choice:
    """The version a run asked for (`tf_version`; None: the usual choice, `_choose`) and the
    source chosen for it, found on the first question asked."""

    requested: str | None = None
    source: Source | None = None


def selected() -> Source:
    """Where placement is answered from in this run (see the module docstring)."""
    if _Choice.source is None:
        _Choice.source = _choose(_Choice.requested)
    return _Choice.source


def _choose(requested: str | None) -> Source:
    versions = shipped_versions()
    if requested is not None:
        return Source(requested, _table(requested))
    installed = installed_tensorflow()
    if os.environ.get(LIVE_KERNELS_ENV, "").strip().lower() in ("1", "true", "yes"):
        return Source(installed and installed["version"], None)
    if installed is None:
        return Source(versions[-1], _table(versions[-1]))
    release = _RELEASE.fullmatch(installed["version"] or "")
    if release and release.group(1) in versions and not installed["plugins"]:
        return Source(release.group(1), _table(release.group(1)))
    return Source(installed["version"], None)


def table_version(version: str) -> str:
    """The shipped table's minor version for `version` ("2.16" or "2.16.2"); TfVersionError,
    naming the versions shipped, where graphfix has none."""
    release = _RELEASE.fullmatch(version.strip())
    if release is None or release.group(1) not in shipped_versions():
        raise TfVersionError(f"no kernel table for TensorFlow {version!r}; graphfix ships "
                             f"{', '.join(shipped_versions())}")
    return release.group(1)


@contextlib.contextmanager
def tf_version(version: str | None) -> Iterator[Source]:
    """Answer placement, inside the block, from the table of TensorFlow `version` ("2.16")
    whatever TF is installed (None: the usual choice); the source it gives. TfVersionError,
    before anything changes, for a version with no table."""
    requested = None if version is None else table_version(version)
    previous = _Choice.requested
    _use(requested)
    try:
        yield selected()
    finally:
        _use(previous)


def _use(requested: str | None) -> None:
    if requested != _Choice.requested or _Choice.source is None:
        _Choice.requested, _Choice.source = requested, None
        _clear_answers()


def signature_table() -> _Table:
    """The table op signatures are read from: the selected one, else (the installed
    registry answers placement) the newest."""
    source = selected()
    return source.table if source.table is not None else _table(shipped_versions()[-1])


@cache
def _kernels_module():
    from graphfix.tf_runtime import import_runtime

    try:
        import_runtime()
        from tensorflow.python.framework import kernels
    except ImportError as exc:
        version = selected().version
        raise NoGpuKernelsError(
            f"TensorFlow{' ' + version if version else ''} cannot be imported ({exc}) to ask "
            "its kernel registry, so placement cannot be checked; name the TensorFlow to "
            f"check for with --tf-version (graphfix has tables of "
            f"{', '.join(shipped_versions())})") from None
    return kernels


_NO_ENTRY: dict = {}


@cache
def _kernels_for(op: str) -> tuple:
    """(device type, label, ((attr, allowed values, their kind), ...)) per kernel of `op`."""
    table = selected().table
    if table is not None:
        return _as_kernels(table.entry(op)["kernels"] if op in table else [])
    return _SNAPSHOT.opened().answer(_SNAPSHOT.kernels, op, _registered_kernels, _as_kernels)


def _as_kernels(kept: list) -> tuple:
    return tuple((kind, label, tuple((c[0], frozenset(c[1]), c[2] if len(c) > 2 else "type")
                                     for c in constraints))
                 for kind, label, constraints in kept)


# What a kernel's constraint allows: types, or strings, ints or bools (TF's KernelAttrsMatch).
_CONSTRAINT_KINDS = ("s", "i", "b")


def _registered_kernels(op: str) -> list:
    """[device type, label, [constraint, ...]] per kernel TF registers for `op` (none for an
    op this TF does not know, such as a custom op); a constraint is [attr, [allowed types]],
    or [attr, [allowed values], "s" | "i" | "b"] for a string, int or bool attr. A TF that
    cannot be imported raises: that is no answer to keep."""
    module = _kernels_module()
    try:
        listed = module.get_registered_kernels_for_op(op).kernel
    except Exception:
        return []
    return [[k.device_type, k.label, [_constraint(c) for c in k.constraint]] for k in listed]


def _constraint(constraint) -> list:
    allowed = constraint.allowed_values.list
    if allowed.type or not any(getattr(allowed, kind) for kind in _CONSTRAINT_KINDS):
        return [constraint.name, sorted(allowed.type)]  # (none at all: TF matches nothing)
    kind = next(kind for kind in _CONSTRAINT_KINDS if getattr(allowed, kind))
    values = getattr(allowed, kind)
    return [constraint.name,
            sorted(v.decode("utf-8", "replace") for v in values) if kind == "s"
            else sorted(values), kind]


@cache
def _op_defaults(op: str) -> dict:
    table = selected().table
    if table is not None:
        return table.entry(op).get("defaults", _NO_ENTRY) if op in table else _NO_ENTRY
    return _SNAPSHOT.opened().answer(_SNAPSHOT.defaults, op, _registered_defaults, dict)


def _registered_defaults(op: str) -> dict:
    """{attr: its default} for the attrs of `op` its kernels constrain or its arguments'
    types and counts read (`signatures.attr_defaults`)."""
    _kernels_module()  # (as above: an import that fails raises)
    try:
        from tensorflow.python.framework import op_def_registry

        op_def = op_def_registry.get(op)
    except Exception:
        return {}
    if op_def is None:
        return {}
    from graphfix.graph.signatures import argument_attrs, attr_defaults

    constrained = {c[0] for _, _, constraints in _registered_kernels(op) for c in constraints}
    return attr_defaults(op_def, constrained | argument_attrs(op_def))


class _Snapshot:
    """The registry's answers kept in a cache folder (see the module docstring): op ->
    kernels and op -> attr defaults, as JSON, one file per TensorFlow install."""

    FORMAT = 2  # (2: constraints of every kind, and every default they read)

    def __init__(self):
        self.directory: Path | None = None  # the cache folder, until the file is read
        self.path: Path | None = None
        self.kernels: dict[str, list] = {}
        self.defaults: dict[str, dict] = {}
        self.learned = False

    def opened(self) -> _Snapshot:
        """This snapshot, its file read on the first question of a run that has a cache (a
        run that asks none pays nothing)."""
        if self.directory is not None:
            directory, self.directory = self.directory, None
            fingerprint = _install_fingerprint()
            if fingerprint is not None:  # (else no TF to be found: the import will say so)
                import graphfix

                self._read(directory / graphfix.__version__ / "kernels" / f"{fingerprint}.json")
        return self

    def _read(self, path: Path) -> None:
        self.path, self.learned = path, False
        try:
            doc = json.loads(path.read_bytes())
            kernels, defaults = doc["kernels"], doc["defaults"]
            if doc["format"] != self.FORMAT or not (isinstance(kernels, dict)
                                                     and isinstance(defaults, dict)):
                raise ValueError("not a snapshot")
            os.utime(path)  # used: the cache's pruning keeps it
        except (OSError, ValueError, KeyError, TypeError):
            kernels, defaults = {}, {}  # none yet, or unreadable: asked anew, written anew
        self.kernels, self.defaults = kernels, defaults

    def answer(self, kept: dict, op: str, ask, read):
        """`read(the answer kept for op)`; where there is none, or one that makes no sense
        (a hand-edited file), `ask(op)` TF and keep what it says."""
        if op in kept:
            try:
                return read(kept[op])
            except (TypeError, ValueError, AttributeError, KeyError, IndexError):
                pass
        kept[op] = ask(op)
        self.learned = self.path is not None
        return read(kept[op])

    def save(self) -> None:
        """Write what TF was asked since the file was read (atomically; a folder that cannot
        be written only means TF is asked again next time)."""
        if not self.learned or self.path is None:
            return
        from graphfix.storage import make_cache_folder, write_atomically

        doc = {"format": self.FORMAT, "kernels": self.kernels, "defaults": self.defaults}
        try:
            make_cache_folder(self.path.parents[2])  # (the folder above <version>/kernels)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, json.dumps(doc, sort_keys=True).encode())
        except OSError:
            pass
        self.learned = False


_SNAPSHOT = _Snapshot()

# The distributions that install the `tensorflow` package (as their .dist-info folders spell
# them); each one's version is TensorFlow's.
_DISTRIBUTIONS = re.compile(
    r"(tensorflow(?:_cpu|_gpu|_macos|_intel|_aarch64|_cpu_aws)?|intel_tensorflow"
    r"|tf_nightly(?:_cpu|_gpu|_macos|_intel)?)-([^-]+)\.dist-info", re.IGNORECASE)


def installed_tensorflow() -> dict | None:
    """The installed TensorFlow, found without importing it: {"distribution": "tensorflow_cpu",
    "version": "2.16.2", "plugins": whether kernel plug-ins are installed} (distribution and
    version None where no single distribution says it); None where there is no TF to
    import."""
    package = _tensorflow_package()
    if package is None:
        return None
    site = package.parent
    try:
        found = {(m.group(1).lower(), m.group(2)) for m in map(_DISTRIBUTIONS.fullmatch,
                                                                os.listdir(site)) if m}
    except OSError:
        found = set()
    versions = {version for _, version in found}
    plugins = site / "tensorflow-plugins"  # (plug-ins register kernels of their own)
    try:
        has_plugins = plugins.is_dir() and any(plugins.iterdir())
    except OSError:
        has_plugins = True
    distribution = min(found)[0] if len(versions) == 1 else None  # (one: tensorflow_intel too)
    return {"distribution": distribution, "version": versions.pop() if len(versions) == 1
            else None, "plugins": has_plugins}


def use_snapshot(cache_dir: Path | None) -> None:
    """A new run: answer from, and add to, the registry snapshot in `cache_dir` for the
    TensorFlow this process would import, where the installed registry answers (call
    `save_snapshot` at the end of the run); None: keep no snapshot (what this process learned
    of its own TF still answers). The source is chosen again (`selected`)."""
    _SNAPSHOT.directory = None if cache_dir is None else Path(cache_dir)
    _SNAPSHOT.path, _SNAPSHOT.learned = None, False
    _Choice.source = None
    _clear_answers()


def _clear_answers() -> None:
    _kernels_for.cache_clear()
    _op_defaults.cache_clear()
    _plan.cache_clear()
    verdict.cache_clear()
    _gpu_kernels.cache_clear()


def save_snapshot() -> None:
    _SNAPSHOT.save()


def _tensorflow_package() -> Path | None:
    """The installed `tensorflow` package's folder, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _install_fingerprint() -> str | None:
    """What the registry depends on, found without importing TF: its package's place, its
    version (the dist-info folder), the size and time of the libraries in the package and
    its `python/` folder, and the plug-ins TF loads (`tensorflow-plugins/`)."""
    import hashlib

    package = _tensorflow_package()
    if package is None:
        return None
    site = package.parent
    parts = [str(package), os.environ.get("TF_ENABLE_ONEDNN_OPTS", "")]
    try:
        parts += sorted(name for name in os.listdir(site) if _DISTRIBUTIONS.fullmatch(name))
        for folder in (package, package / "python", site / "tensorflow-plugins"):
            if not folder.is_dir():
                continue
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if ".so" in entry.name or entry.name.endswith((".dylib", ".dll", ".pyd")):
                    stat = entry.stat()
                    parts.append(f"{folder.name}/{entry.name}:{stat.st_size}:{stat.st_mtime_ns}")
    except OSError:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def gpu_kernels_registered() -> bool:
    """Whether the source answering has GPU kernels (every table does; the installed
    registry of a `tensorflow-cpu` has none)."""
    return _gpu_kernels()


@cache
def _gpu_kernels() -> bool:
    return any(kind == "GPU" for kind, _, _ in _kernels_for("MatMul"))


def require_gpu_kernels() -> None:
    if not gpu_kernels_registered():
        version = selected().version
        raise NoGpuKernelsError(
            f"the installed TensorFlow{' ' + version if version else ''} registers no GPU "
            "kernels (a tensorflow-cpu install?), so GPU placement cannot be checked against "
            "it; name the TensorFlow the graph will run on with --tf-version (graphfix has "
            f"tables of {', '.join(shipped_versions())})"
        )


def registered(op: str) -> bool:
    """Whether this TensorFlow registers a kernel for `op` on any device. An op with none is
    not TF's to judge here: a custom op whose library the program loads, or a library
    function called by name (which TF's placer lets run anywhere)."""
    return bool(_kernels_for(op))


class _Plan:
    """How `supports` answers for one op on one device type: `always` (a kernel whatever
    the attrs), `never` (none whatever the attrs), else the kernels to match and the few
    attrs they constrain (each with the kind of value it holds), so a node's other attrs are
    never read."""

    __slots__ = ("always", "never", "kernels", "attrs", "defaults", "answers")

    def __init__(self, op: str, device_type: str):
        kernels = [(kind, label, constraints) for kind, label, constraints in _kernels_for(op)
                   if kind in (device_type, "DEFAULT")]
        # TF's lookup tries the device type's kernels first, then DEFAULT's.
        kernels.sort(key=lambda kernel: kernel[0] != device_type)
        self.kernels = kernels
        self.never = not kernels
        self.always = any(not label and not constraints for _, label, constraints in kernels)
        self.attrs = tuple(sorted({(name, kind) for _, _, constraints in kernels
                                   for name, _, kind in constraints}))
        defaults = _op_defaults(op) if self.attrs else {}
        # (a list(type) attr's default, as a node's value is read: a tuple)
        self.defaults = {name: tuple(value) if isinstance(value, list) else value
                         for name, value in defaults.items()}
        self.answers: dict[tuple, bool] = {}  # (label, the attrs' values) -> supported

    def supports(self, node) -> bool:
        attrs = node.attr
        label = attrs["_kernel"].s.decode() if "_kernel" in attrs else ""
        if self.never or (self.always and not label):
            return not self.never
        key = [label]  # then each constrained attr's value (a list(type) attr: a tuple)
        for name, kind in self.attrs:
            if name not in attrs:
                key.append(self.defaults.get(name))
                continue
            value = attrs[name]
            if kind == "type":
                key.append(value.type or tuple(value.list.type) or self.defaults.get(name))
            elif kind == "s":
                key.append(value.s.decode("utf-8", "replace"))
            else:
                key.append(value.i if kind == "i" else value.b)
        key = tuple(key)
        answer = self.answers.get(key)
        if answer is None:
            answer = self.answers[key] = self._matches(label, dict(zip(self.attrs, key[1:])))
        return answer

    def _matches(self, label: str, given: dict) -> bool:
        for _, kernel_label, constraints in self.kernels:
            if kernel_label != label:
                continue
            for name, allowed, kind in constraints:
                value = given[name, kind]
                if value is None:
                    break
                if isinstance(value, tuple):  # (a list(type) attr: every type allowed)
                    if not all(t in allowed for t in value):
                        break
                elif value not in allowed:
                    break
            else:
                return True
        return False


@cache
def _plan(op: str, device_type: str) -> _Plan:
    return _Plan(op, device_type)


@cache
def verdict(op: str, device_type: str) -> bool | None:
    """What the registry says of every node of `op` on `device_type` (upper case), without
    reading one: True (a kernel whatever its attrs; also for an op with no kernel on any
    device, which is not this TensorFlow's to judge: see `registered`), False (none
    whatever its attrs), None (it depends on the node: ask `supports`). A `_kernel` label
    is read only where the answer depends on the node."""
    if not registered(op):
        return True
    plan = _plan(op, device_type)
    return True if plan.always else False if plan.never else None


def supports(node, device_type: str) -> bool:
    """Whether a kernel is registered for `node` (its op, type attrs and `_kernel` label)
    on `device_type`.

    Like TF's `FindKernelRegistration`: kernels for the device type first, then those
    registered for DEFAULT as a fallback.
    """
    return _plan(node.op, device_type.upper()).supports(node)


def describe_attrs(node) -> str:
    """The node's type attrs in TF's wording: `dtype=DT_INT32`."""
    from graphfix.graph import proto

    names = proto.DataType.Name
    parts = []
    for name, value in sorted(node.attr.items()):
        if value.WhichOneof("value") == "type":
            parts.append(f"{name}={names(value.type)}")
    return ", ".join(parts)
