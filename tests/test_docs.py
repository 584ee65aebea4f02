"""The transform pages in docs/ are rendered from the docstrings: they must be current."""

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
from gen_docs import pages  # noqa: E402


def test_transform_pages_are_current():
    for name, text in pages().items():
        page = REPO / "docs" / "transforms" / f"{name}.md"
        assert page.exists(), f"run tools/gen_docs.py: {page} is missing"
        assert page.read_text() == text, f"run tools/gen_docs.py: {page} is stale"
