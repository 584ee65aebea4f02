"""Write graphfix/graph/tables/tfX.Y.json from the installed TensorFlow X.Y: its op
signatures and its kernel registry's answers, the table graphfix answers placement from
without TF (`graphfix.graph.kernels`).

Each op's entry: its signature (`graphfix.graph.signatures`), the defaults of the attrs its
arguments and kernels read, and its CPU, GPU and DEFAULT kernels, one op per line (graphfix
decodes only the lines of the ops a graph uses). Run it in a venv of each TensorFlow version
graphfix supports, with the default `tensorflow` wheel on Linux x86-64 (it registers GPU
kernels without a GPU; a tensorflow-cpu registry has none, and is refused):

    python3.11 -m venv /work/tfvenvs/2.16
    /work/tfvenvs/2.16/bin/pip install 'tensorflow==2.16.*'
    /work/tfvenvs/2.16/bin/python tools/gen_kernel_table.py

`--check` says whether the installed TF's table still matches its registry (as
tests/test_kernel_tables.py does); `--diff` what differs between consecutive versions' tables
(no TF needed; docs/kernel_tables.md).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

TABLES = pathlib.Path(__file__).resolve().parents[1] / "graphfix" / "graph" / "tables"
FORMAT = 1


def current_table() -> dict:
    """op -> its entry, as the installed TensorFlow's registries say it (see the module
    docstring): what graphfix would ask them."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    from graphfix.graph import kernels
    from graphfix.graph.signatures import argument_attrs, attr_defaults, signature_from_op_def

    buffer = pywrap_tf_session.TF_GetAllOpList()
    ops = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer))
    table = {}
    for op in sorted(ops.op, key=lambda o: o.name):
        entry = signature_from_op_def(op)
        registered = [k for k in kernels._registered_kernels(op.name)
                      if k[0] in kernels.TABLE_DEVICE_TYPES]
        constrained = {c[0] for _, _, constraints in registered for c in constraints}
        defaults = attr_defaults(op, constrained | argument_attrs(op))
        entry.pop("defaults", None)
        if defaults:
            entry["defaults"] = defaults
        entry["kernels"] = registered
        table[op.name] = entry
    return table


def read_table(version: str) -> dict:
    """op -> entry, of the shipped table of TensorFlow `version` ("2.16")."""
    lines = (TABLES / f"tf{version}.json").read_text().splitlines()
    return {json.loads(name): json.loads(entry) for name, _, entry in
            (line.rstrip(",").partition(":") for line in lines[1:-1])}


def check() -> int:
    """Whether the installed TensorFlow's table is what its registry says now: 0, else 1
    with the ops that differ (regenerate)."""
    import tensorflow as tf

    minor = ".".join(tf.__version__.split(".")[:2])
    shipped, live = read_table(minor), current_table()
    changed = sorted(op for op in set(shipped) | set(live) if shipped.get(op) != live.get(op))
    print(f"tf{minor}.json: {len(live)} ops, {len(changed)} differ from TensorFlow "
          f"{tf.__version__}'s registry{': ' if changed else ''}{', '.join(changed[:20])}")
    return 1 if changed else 0


def _devices(entry: dict | None) -> dict:
    """device type -> its kernels, as a set (what the op's support on it is)."""
    kernels = {}
    for device, label, constraints in (entry or {}).get("kernels", []):
        kernels.setdefault(device, set()).add(json.dumps([label, constraints], sort_keys=True))
    return kernels


def differences(older: dict, newer: dict) -> dict:
    """What changed from one table to the next: ops added and removed; ops whose signature
    (arguments, statefulness, defaults) changed; ops kept whose kernels changed, by device
    type: {"GPU": [ops], ...}, and those that gained or lost every kernel of one."""
    kept = sorted(set(older) & set(newer))
    signature = ("in", "out", "stateful", "defaults")
    changed: dict[str, list[str]] = {}
    gained: dict[str, list[str]] = {}
    lost: dict[str, list[str]] = {}
    for op in kept:
        before, after = _devices(older[op]), _devices(newer[op])
        for device in sorted(set(before) | set(after)):
            if device not in before:
                gained.setdefault(device, []).append(op)
            elif device not in after:
                lost.setdefault(device, []).append(op)
            elif before[device] != after[device]:
                changed.setdefault(device, []).append(op)
    return {"added": sorted(set(newer) - set(older)), "removed": sorted(set(older) - set(newer)),
            "signature changed": [op for op in kept if any(
                older[op].get(k) != newer[op].get(k) for k in signature)],
            "gained a device type": gained, "lost a device type": lost,
            "kernels changed": changed}


def diff() -> None:
    """Print, per pair of consecutive shipped versions, what `differences` finds."""
    from graphfix.graph import kernels

    versions = kernels.shipped_versions()
    tables = {v: read_table(v) for v in versions}
    for older, newer in zip(versions, versions[1:]):
        found = differences(tables[older], tables[newer])
        print(f"## {older} -> {newer}")
        for what, ops in found.items():
            if isinstance(ops, dict):
                for device, listed in ops.items():
                    print(f"- {what} ({device}, {len(listed)}): {', '.join(listed)}")
            else:
                print(f"- {what} ({len(ops)}): {', '.join(ops) if ops else '-'}")


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        sys.exit(check())
    if sys.argv[1:] == ["--diff"]:
        diff()
        return
    import tensorflow as tf

    from graphfix.graph import kernels

    installed = kernels.installed_tensorflow()
    table = current_table()
    if not any(kind == "GPU" for kind, _, _ in table["MatMul"]["kernels"]):
        sys.exit(f"TensorFlow {tf.__version__} here registers no GPU kernels "
                 f"({installed['distribution']}): write tables from the default 'tensorflow' "
                 "wheel")
    minor = ".".join(tf.__version__.split(".")[:2])
    head = {"tensorflow": tf.__version__, "distribution": installed["distribution"],
            "platform": f"{sys.platform}-{os.uname().machine}", "format": FORMAT}
    lines = [f'{json.dumps(op)}:{json.dumps(entry, separators=(",", ":"), sort_keys=True)}'
             for op, entry in table.items()]
    path = TABLES / f"tf{minor}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(head)[:-1] + ',"ops":{\n' + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {path} ({len(table)} ops, {path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
