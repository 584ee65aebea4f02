"""Verification: a graph imported into a fresh TF graph, placed and run on the target devices.

Owns running a graph with synthetic feeds and comparing runs (`run`), on real GPUs when the
machine has them, else on logical CPU devices standing in for them, and on a real local
TensorFlow cluster for ps/worker graphs, every worker replica at once (`cluster`), and the
graph a traced script built (`traced`: in the script's own process where the graph calls its
Python functions; the trace's child imports it, it never imports the trace).

May import: the TF runtime (through `graphfix.tf_runtime`), `graphfix.graph`,
`graphfix.findings`. Never imports `graphfix.source` or `graphfix.cli`.
"""
