"""TF's own kernel registry: which device types can run a node with its attrs.

This is the one place the graph path touches the TF runtime (`import tensorflow` costs
seconds), and only when a placement question is actually asked. The default `tensorflow`
wheel registers its GPU kernels even on a machine with no GPU, so a GPU-placement bug is
caught anywhere; a `tensorflow-cpu` install registers none, and we say so rather than pass.

With a cache folder (`use_snapshot`), the registry's answers for the ops asked are kept
there, per TensorFlow install (its version and the size and time of its libraries and
plug-ins), so the next `check` that asks only about those ops does not load TF at all.
"""

from __future__ import annotations

import json
import os
import sys
from functools import cache
from pathlib import Path


class NoGpuKernelsError(RuntimeError):
    """Placement cannot be judged: the installed TensorFlow registers no GPU kernels, or
    cannot be imported at all."""


@cache
def _kernels_module():
    from graphfix.tf_runtime import import_runtime

    try:
        import_runtime()
        from tensorflow.python.framework import kernels
    except ImportError as exc:
        raise NoGpuKernelsError(f"TensorFlow cannot be imported ({exc}), so placement cannot "
                                "be checked; install the default 'tensorflow' wheel") from None
    return kernels


@cache
def _kernels_for(op: str) -> tuple:
    """(device type, label, ((attr, allowed types), ...)) per kernel registered for `op`."""
    return _SNAPSHOT.opened().answer(_SNAPSHOT.kernels, op, _registered_kernels, _as_kernels,
                                     "kernels")


def _as_kernels(kept: list) -> tuple:
    return tuple((kind, label, tuple((name, frozenset(types)) for name, types in constraints))
                 for kind, label, constraints in kept)


def _registered_kernels(op: str) -> list:
    """[device type, label, [[attr, [allowed types]], ...]] per kernel TF registers for `op`
    (none for an op this TF does not know, such as a custom op). A TF that cannot be
    imported raises: that is no answer to keep."""
    module = _kernels_module()
    try:
        listed = module.get_registered_kernels_for_op(op).kernel
    except Exception:
        return []
    return [[k.device_type, k.label,
             [[c.name, sorted(c.allowed_values.list.type)] for c in k.constraint]]
            for k in listed]


@cache
def _op_defaults(op: str) -> dict:
    return _SNAPSHOT.opened().answer(_SNAPSHOT.defaults, op, _registered_defaults,
                                     lambda known: {name: tuple(t) for name, t in known.items()},
                                     "defaults")


def _registered_defaults(op: str) -> dict:
    """{attr: [its default type]} for the type attrs of `op` that have a default."""
    _kernels_module()  # (as above: an import that fails raises)
    try:
        from tensorflow.python.framework import op_def_registry

        op_def = op_def_registry.get(op)
    except Exception:
        return {}
    if op_def is None:
        return {}
    out = {}
    for attr in op_def.attr:
        if attr.HasField("default_value") and attr.default_value.WhichOneof("value") == "type":
            out[attr.name] = [attr.default_value.type]
    return out


class _Snapshot:
    """The registry's answers kept in a cache folder (see the module docstring): op ->
    kernels and op -> default types, as JSON, one file per TensorFlow install."""

    FORMAT = 1

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

    def answer(self, table: dict, op: str, ask, read, kind: str):
        """`read(the answer kept in table for op)`; else the bundled table's (its `kind`
        part), where it was written from the installed TensorFlow; where neither has one,
        or one that makes no sense (a hand-edited file), `ask(op)` TF and keep what it
        says."""
        for known in (table, _BUNDLED.answers()):
            if op in known:
                try:
                    return read(known[op] if known is table else known[op][kind])
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
            elif known is not table and known:
                # The bundled table lists every op the installed TF registers: one it does
                # not list has no kernels and no defaults in this TensorFlow.
                return read([] if kind == "kernels" else {})
        table[op] = ask(op)
        self.learned = self.path is not None
        return read(table[op])

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

# The device types whose kernels the bundled table keeps (graphfix places on CPUs and GPUs).
BUNDLED_DEVICE_TYPES = ("CPU", "GPU", "DEFAULT")
LIVE_KERNELS_ENV = "GRAPHFIX_LIVE_KERNELS"


class _Bundled:
    """The registry's answers shipped with graphfix (`kernel_table.json`, written by
    tools/gen_kernel_table.py), used only when the installed TensorFlow is the one they were
    written from (`bundled_install`): a `fix` on that TF never imports its runtime."""

    def __init__(self):
        self._answers: dict | None = None

    def answers(self) -> dict:
        """op -> {"kernels": ..., "defaults": ...}, decoded per op on first use; empty where
        the installed TensorFlow is not the table's, or GRAPHFIX_LIVE_KERNELS is set to 1
        (ask the installed TF's own registry, as for any other TensorFlow)."""
        if os.environ.get(LIVE_KERNELS_ENV, "").strip().lower() in ("1", "true", "yes"):
            return {}
        if self._answers is None:
            self._answers = {}
            path = Path(__file__).with_name("kernel_table.json")
            try:
                lines = path.read_text().splitlines()
                head = json.loads(lines[0].removesuffix(',"ops":{') + "}")
            except (OSError, ValueError, IndexError):
                return self._answers
            if head == bundled_install():
                self._answers = _DecodedLines(lines[1:-1])
        return self._answers


class _DecodedLines(dict):
    """op -> its entry, each line (`"Op":{...},`) decoded on first use."""

    def __init__(self, lines: list[str]):
        super().__init__()
        self._texts = {}
        for line in lines:
            name, _, entry = line.rstrip(",").partition(":")
            self._texts[json.loads(name)] = entry

    def __missing__(self, op: str) -> dict:
        entry = self[op] = json.loads(self._texts[op])
        return entry

    def __contains__(self, op: object) -> bool:
        return dict.__contains__(self, op) or op in self._texts

    def __bool__(self) -> bool:
        return bool(self._texts)


_BUNDLED = _Bundled()


def bundled_install() -> dict | None:
    """What the bundled table's answers depend on, found without importing TF: the
    distribution (the default `tensorflow` wheel, not `tensorflow-cpu`) and its version,
    the platform, and TF_ENABLE_ONEDNN_OPTS. None where no such TensorFlow is installed."""
    package = _tensorflow_package()
    if package is None:
        return None
    site = package.parent
    versions = [p.name[len("tensorflow-"):-len(".dist-info")]
                for p in site.glob("tensorflow-*.dist-info")]
    plugins = site / "tensorflow-plugins"  # (plug-ins register kernels of their own)
    if len(versions) != 1 or (plugins.is_dir() and any(plugins.iterdir())):
        return None
    return {"tensorflow": versions[0], "platform": f"{sys.platform}-{os.uname().machine}",
            "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "")}


def use_snapshot(cache_dir: Path | None) -> None:
    """Answer from, and add to, the registry snapshot in `cache_dir` for the TensorFlow
    this process would import (call `save_snapshot` at the end of the run); None: keep no
    snapshot (what this process learned of its own TF still answers)."""
    _SNAPSHOT.directory = None if cache_dir is None else Path(cache_dir)
    _SNAPSHOT.path, _SNAPSHOT.learned = None, False
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
        parts += sorted(p.name for p in site.glob("tensorflow-*.dist-info"))
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
    """Whether this TensorFlow carries GPU kernels (the default wheel does, even on CPU)."""
    return _gpu_kernels()


@cache
def _gpu_kernels() -> bool:
    return any(kind == "GPU" for kind, _, _ in _kernels_for("MatMul"))


def require_gpu_kernels() -> None:
    if not gpu_kernels_registered():
        raise NoGpuKernelsError(
            "this TensorFlow registers no GPU kernels (a tensorflow-cpu install?), so GPU "
            "placement cannot be checked; install the default 'tensorflow' wheel"
        )


def registered(op: str) -> bool:
    """Whether this TensorFlow registers a kernel for `op` on any device. An op with none is
    not TF's to judge here: a custom op whose library the program loads, or a library
    function called by name (which TF's placer lets run anywhere)."""
    return bool(_kernels_for(op))


class _Plan:
    """How `supports` answers for one op on one device type: `always` (a kernel whatever
    the attrs), `never` (none whatever the attrs), else the kernels to match and the few type
    attrs they constrain, so a node's other attrs are never read."""

    __slots__ = ("always", "never", "kernels", "attrs", "defaults", "answers")

    def __init__(self, op: str, device_type: str):
        kernels = [(kind, label, constraints) for kind, label, constraints in _kernels_for(op)
                   if kind in (device_type, "DEFAULT")]
        # TF's lookup tries the device type's kernels first, then DEFAULT's.
        kernels.sort(key=lambda kernel: kernel[0] != device_type)
        self.kernels = kernels
        self.never = not kernels
        self.always = any(not label and not constraints for _, label, constraints in kernels)
        self.attrs = tuple(sorted({name for _, _, constraints in kernels
                                   for name, _ in constraints}))
        self.defaults = _op_defaults(op) if self.attrs else {}
        self.answers: dict[tuple, bool] = {}  # (label, the attrs' types) -> supported

    def supports(self, node) -> bool:
        attrs = node.attr
        label = attrs["_kernel"].s.decode() if "_kernel" in attrs else ""
        if self.never or (self.always and not label):
            return not self.never
        key = [label]  # then each constrained attr's type (a list(type) attr: a tuple)
        for name in self.attrs:
            if name in attrs:
                value = attrs[name]
                key.append(value.type or tuple(value.list.type) or self.defaults.get(name))
            else:
                key.append(self.defaults.get(name))
        key = tuple(key)
        answer = self.answers.get(key)
        if answer is None:
            answer = self.answers[key] = self._matches(label, dict(zip(self.attrs, key[1:])))
        return answer

    def _matches(self, label: str, given: dict) -> bool:
        for _, kernel_label, constraints in self.kernels:
            if kernel_label != label:
                continue
            for name, allowed in constraints:
                types = given[name]
                if types is None:
                    break
                if not all(t in allowed for t in (types if isinstance(types, tuple)
                                                   else (types,))):
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
