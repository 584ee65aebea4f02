"""The graph side: serialized TF graphs read, indexed, queried and written without the TF runtime.

Owns the protobuf boundary (`proto`: graphfix's own messages of TF's formats, no TF needed), graph
files (`graphfile`: GraphDef, MetaGraphDef and SavedModel read and written), the index the
transforms query and edit (`index`) and its parts: op signatures (`signatures`), colocation
groups (`colocation`), the columns read of every node (`columns`), input strings and the edge
table (`edges`); device strings (`devices`), TF's kernel registry
(`kernels`, the one module here that loads the TF runtime, and only when asked), placement as
TF's placer would do it (`placement`) and training-graph queries (`training`: update ops,
train ops, towers) and the gradient sub-graph between the towers and the optimizer
(`gradients`: tower averages, sparse gradients, the variable a gradient is of).

May import: the standard library, protobuf, `graphfix.findings`, `graphfix.storage`,
`graphfix.tf_runtime`.
Never imports `graphfix.source`, `graphfix.verification`, `graphfix.cli` or the transforms.
"""
