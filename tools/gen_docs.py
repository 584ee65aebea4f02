"""Write docs/transforms/<name>.md from each transform's docstring and parameters.

The docstring is the documentation (as in Fixit): this renders it, so the two cannot drift;
tests/test_docs.py fails when a page is stale. Run: .venv/bin/python tools/gen_docs.py
"""

from __future__ import annotations

import inspect
import pathlib
import sys


def render(transform) -> str:
    module = sys.modules[transform.__module__]
    doc = inspect.cleandoc(module.__doc__ or "")
    title, _, body = doc.partition("\n")
    lines = [f"# {title.strip()}", "", body.strip(), "", "## Surfaces", ""]
    lines += [f"- {surface}" for surface in transform.surfaces()]
    lines += ["", "## Parameters", ""]
    if transform.params:
        lines += ["| name | default | choices | meaning |", "|---|---|---|---|"]
        for p in transform.params:
            default = "[]" if p.multiple else repr(p.default)
            choices = ", ".join(p.choices) if p.choices else ""
            lines.append(f"| `{p.name}` | `{default}` | {choices} | {p.help} |")
        lines += ["", f"Set with `--set {transform.name}.KEY=VALUE`."]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    import graphfix

    return {name: render(t) for name, t in graphfix.all_transforms().items()}


def main() -> None:
    root = pathlib.Path(__file__).resolve().parents[1] / "docs" / "transforms"
    root.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (root / f"{name}.md").write_text(text)
        print(f"wrote {root / name}.md")


if __name__ == "__main__":
    main()
