"""A source rule's examples, the user's view of what it does: code it reports on and code it
leaves alone, on the rule's class (`VALID`, `INVALID`) whatever its shape (libcst's
`SourceCodemod` or the stdlib tree's `AstRule`). No libcst here."""

from __future__ import annotations

import dataclasses
import textwrap


@dataclasses.dataclass
class Example:
    """Code on which a codemod reports (in its class's `INVALID`) or stays silent (`VALID`),
    as its transform alone sees it in a file of its own; `tests/test_rule_examples.py`
    makes a test of each. For an INVALID one: `fixed`, what `graphfix fix` writes (None: a
    finding that is not fixed), and `says`, words its first finding's message holds."""

    code: str
    fixed: str | None = None
    says: str = ""

    def __post_init__(self):
        self.code = textwrap.dedent(self.code).lstrip("\n")
        if self.fixed is not None:
            self.fixed = textwrap.dedent(self.fixed).lstrip("\n")
