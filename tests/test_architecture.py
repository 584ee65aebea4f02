"""The parts of graphfix import one another only in the directions their docstrings state
(docs/architecture.md): the graph side never imports the source side or verification, the
transforms import the core and never the reverse. Read from the code, imports inside
functions included (they run too); imports under `if TYPE_CHECKING:` never run and are not
counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Modules every part may import: the package, and the small modules beneath every part.
CORE = ("graphfix", "graphfix.findings", "graphfix.config", "graphfix.tf_runtime",
        "graphfix.storage", "graphfix.phases", "graphfix.escaping", "graphfix.errors")

# part -> the parts (module prefixes) it may import besides CORE and itself.
ALLOWED = {
    "graphfix.graph": (),
    # (graph.devices: a device string is parsed once, as TF reads it, for both surfaces)
    "graphfix.source": ("graphfix.registry", "graphfix.graph.devices"),
    "graphfix.verification": ("graphfix.graph",),
    "graphfix.registry": ("graphfix.transforms",),
    "graphfix.config": ("graphfix.registry",),  # `set` is checked as --set is
    "graphfix.driver": ("graphfix.graph", "graphfix.source", "graphfix.registry"),
    "graphfix.api": ("graphfix.graph", "graphfix.source", "graphfix.registry", "graphfix.driver",
                     "graphfix.verification", "graphfix.trace"),
    "graphfix.runtime": ("graphfix.graph",),
    # Trace: the child runs the script; the parent reads what it wrote as the graph side
    # does, and runs the graph transforms on it as the driver does.
    # (source: a traced finding at a source line honours its suppression comment)
    "graphfix.trace": ("graphfix.graph", "graphfix.source", "graphfix.registry",
                       "graphfix.driver"),
    # The traced child verifies a graph that calls the script's Python functions (only its
    # process has them), with the transforms' checks of the run (`registry.verify_checks`);
    # verification never imports the trace.
    "graphfix.trace.child": ("graphfix.graph", "graphfix.trace", "graphfix.verification",
                             "graphfix.registry"),
    # The HTML report: the graph side's numbers, the driver's check and fix of each graph.
    "graphfix.report": ("graphfix.graph", "graphfix.driver"),
    "graphfix.cli": ("graphfix.graph", "graphfix.source", "graphfix.registry", "graphfix.driver",
                     "graphfix.verification", "graphfix.api", "graphfix.trace",
                     "graphfix.report"),
    "graphfix.__main__": ("graphfix.cli",),
    # The transforms: the core and the graph and source sides, never the driver, the API,
    # verification or the command line.
    "graphfix.transforms": ("graphfix.graph", "graphfix.source", "graphfix.registry"),
}


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[0] == "transforms":
        parts = ["graphfix", *parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> list[tuple[str, Path]]:
    paths = [p for p in sorted((ROOT / "graphfix").rglob("*.py"))
             if "transforms" not in p.relative_to(ROOT / "graphfix").parts]
    paths += sorted((ROOT / "transforms").rglob("*.py"))
    return [(_module_name(p), p) for p in paths]


def _part_of(module: str) -> str:
    for part in sorted(ALLOWED, key=len, reverse=True):
        if module == part or module.startswith(part + "."):
            return part
    return module


def _under_type_checking(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every graphfix module `module` imports."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "graphfix":  # `from graphfix import registry` imports graphfix.registry
                found += [(node.lineno, f"graphfix.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, name))
    return [(line, name) for line, name in found if name.split(".")[0] == "graphfix"]


def _allowed(importer: str, imported: str) -> bool:
    own = _part_of(importer)
    if imported in CORE or _part_of(imported) == own:
        return True
    if imported.startswith("graphfix.") and imported.split(".")[1] in ("__version__",):
        return True
    return any(imported == p or imported.startswith(p + ".") for p in ALLOWED.get(own, ()))


def test_the_rules_cover_every_module():
    unknown = [m for m, _ in _modules() if _part_of(m) not in ALLOWED and m not in CORE]
    assert unknown == []


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_imports_run_in_the_stated_direction(module, path):
    against = [f"{path.relative_to(ROOT)}:{line} imports {name}"
               for line, name in _imports(module, path) if not _allowed(module, name)]
    assert against == []


def test_the_checker_sees_a_wrong_import(tmp_path):
    """A graph module importing the source side, inside a function, is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from graphfix.source import codemod\n")
    assert [name for _, name in _imports("graphfix.graph.bad", bad)] == ["graphfix.source"]
    assert not _allowed("graphfix.graph.bad", "graphfix.source")
    assert _allowed("graphfix.cli.main", "graphfix.source")


def _private_names(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for every `from graphfix... import _name` of the file (not a
    dunder such as `__version__`)."""
    tree = ast.parse(path.read_text())
    return [(node.lineno, node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and not node.level
            and (node.module or "").split(".")[0] == "graphfix"
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")]


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_a_private_name_is_used_only_inside_its_part(module, path):
    """A name beginning with `_` is its part's own: another part that needs it needs a
    public, documented name (the driver's `rewritten_files`, which the traced fix uses)."""
    against = [f"{path.relative_to(ROOT)}:{line} imports {name} from {imported}"
               for line, imported, name in _private_names(path)
               if _part_of(imported) != _part_of(module)]
    assert against == []
