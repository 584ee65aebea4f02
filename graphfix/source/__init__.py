"""The source side: Python files and notebooks that build TF1-style graphs, read and rewritten.

Owns the two rule bases the transforms' source surfaces subclass (`codemod`, libcst's tree
and edits of it; `astrule`, the stdlib's tree and text edits; `renames`, a rename table's
rule on the latter), the questions of where a node sits that rules share (`scopes`), their
examples (`examples`),
the running of a file's rules of either shape in order (`run`), the TF vocabulary every rule
and pre-check reads (`vocabulary`), the central pre-filter that applies each
rule's declared trigger vocabulary before libcst (`prefilter`), the reading of a file's
text and its stdlib syntax tree (`syntax`), source files found under a directory (`files`),
Jupyter notebooks as sources (`notebooks`) and the per-file result cache (`cache`).

May import: the standard library, libcst (only where a file is parsed: never at import time
of `files`, `syntax`, `vocabulary`, `prefilter`, `cache`, `examples`, `astrule`, `renames`,
`run` or `project`), `graphfix.findings`,
`graphfix.config`, `graphfix.registry`, `graphfix.storage`, and of `graphfix.graph` only
`graph.devices` (a device string is parsed once, as TF reads it, for both surfaces). Never
imports the rest of `graphfix.graph`, `graphfix.verification`, `graphfix.cli` or the
transforms.
"""
