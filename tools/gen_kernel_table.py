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

tests/test_kernel_tables.py checks the table of the installed TF still matches its registry;
docs/kernel_tables.md says what differs between versions (`--diff`: measured from the tables).
"""

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


def main() -> None:
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
