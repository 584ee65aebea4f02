"""The inputs of a run: the graphs and sources its paths name, and the files a transform's
param takes (`Param.files`) rather than the run reading them as inputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from graphfix.driver.selection import Selected
from graphfix.graph import graphfile as graphio
from graphfix.source.files import SOURCE_SUFFIXES, excluded, walk_sources
from graphfix.storage import path_problem


class InputFile(NamedTuple):
    """One input of a run: its label (as given, or found in a directory given), its path,
    and why it cannot be read (None: it can)."""

    label: str
    path: Path
    problem: str | None


def iter_inputs(paths: list[str], excludes: tuple[str, ...] | list[str] = ()
                ) -> list[InputFile]:
    """(label as given, path, why it cannot be read or None) for every graph and source the
    paths name, in order; what cannot be read (a symlink loop, a FIFO, a directory that
    cannot be listed, ...) is found without opening it (`graphfix.storage.path_problem`).

    A directory gives its Python files and notebooks (see `graphfix.source.files.walk_sources`: no hidden
    folders, virtual environments, node_modules, git-ignored files, nor `excludes`); a file
    named explicitly is read unless `excludes` matches the path as given or its name.
    """
    out: list[InputFile] = []
    for given in paths:
        path = Path(given)
        problem = path_problem(path)
        if problem is None and path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
            problem = "cannot read directory: permission denied"
        if problem is not None:
            out.append(InputFile(given, path, problem))
        elif path.is_dir() and not graphio.is_graph_path(path):
            try:
                found = walk_sources(path, excludes)
            except OSError as exc:
                where = exc.filename or given
                out.append(InputFile(str(where), Path(where), "cannot read directory: "
                                     f"{(exc.strerror or str(exc)).lower()}"))
                continue
            out.extend(InputFile(str(sub), sub, path_problem(sub)) for sub in found)
        elif not (excludes and excluded(path.as_posix(), excludes, path.resolve().as_posix())):
            out.append(InputFile(given, path, None))
    return out


def give_files_to_params(inputs: list[InputFile], selected: Selected,
                         *, with_graph: bool | None = None
                         ) -> tuple[list[InputFile], Selected]:
    """The inputs without the files a selected transform's param takes (`Param.files`, such
    as stateful-custom-ops' C++ `sources`), and the run's transforms with those files added
    to that param: each named on the command line, then, in a run with a graph, each found
    in the folder of a Python source or notebook given, in order, once. A file no selected
    param takes stays an input (reported as skipped). `with_graph`: whether the run has a
    graph (default: whether a graph file is among the inputs; a traced script's run has
    the graph it builds)."""
    if not any(param.files for transform, _ in selected.transforms for param in transform.params):
        return inputs, selected
    named = [path for _, path, problem in inputs if problem is None]
    beside = []
    # (Found beside the sources only for a graph of the run to be read with: a run of
    # sources alone leaves the C++ of their folders unread.)
    if with_graph is None:
        with_graph = any(graphio.is_graph_path(path) for path in named)
    for folder in dict.fromkeys(path.parent for path in named
                                if with_graph and path.suffix in SOURCE_SUFFIXES):
        try:
            beside += [sub for sub in sorted(folder.iterdir()) if sub.is_file()]
        except OSError:
            continue  # (a folder that cannot be listed: its named files are still read)
    taken: set[Path] = set()
    transforms = []
    for transform, options in selected.transforms:
        options = dict(options)
        for param in transform.params:
            if not param.files:
                continue
            found = [p for p in (*named, *beside) if p.name.endswith(param.files)]
            taken.update(found)
            given = list(options.get(param.name) or [])
            options[param.name] = list(dict.fromkeys(
                [*given, *(str(p) for p in found if str(p) not in given)]))
        transforms.append((transform, options))
    kept = [item for item in map(InputFile._make, inputs)
            if item.problem is not None or item.path not in taken]
    return kept, Selected(transforms, selected.target_devices)
