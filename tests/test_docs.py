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


def test_the_guides_worked_example_is_colocate_gradients_as_it_is():
    """docs/guide.md walks through colocate-gradients: each code block of that section is
    the transform's code as it is, and the size it states is what tools/transform_size.py
    counts, within the 150 lines issue 35 sets a new transform."""
    import re

    from transform_size import package_size

    guide = (REPO / "docs" / "guide.md").read_text()
    section = guide[guide.index("### A worked example: colocate-gradients"):]
    section = section[:section.find("\n## ", 1) if "\n## " in section else None]
    package = REPO / "transforms" / "colocate_gradients"
    code = "".join(p.read_text() for p in sorted(package.glob("*.py")))
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2 and all(block in code for block in blocks)
    files, lines = package_size(package)
    assert re.search(rf"both\s+surfaces in {lines} lines of code", section)
    assert files == 2 and lines <= 150
