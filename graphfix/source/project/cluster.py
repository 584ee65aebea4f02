"""Where a program makes a cluster with a parameter-server job, and which code runs with it:
the facts replica-placement asks the project model (`FileView.cluster_reaching`).

A file's part records its clusters (`clusters`: a `ClusterSpec` or `Server` given a dict
with a `'ps'` job, spelled out or bound to a name, as [line, ps task count or None]). The
code that runs with a cluster is its program: the unit that makes it, the units that call
that one (they get the cluster, or the server, and build with it), and the functions and
classes those call, transitively. A function of the same file that none of them calls (a
local evaluation graph beside the training function, both called from the script's
`__main__`) is not in it, nor is a module body they only read globals from.

Plain Python: the part is read in the survey's workers without libcst.
"""

from __future__ import annotations

import ast
import weakref
from collections import deque
from typing import TYPE_CHECKING

from graphfix.source.project.names import AstTfNames, argument
from graphfix.source.syntax import call_arguments, strings_in, tail_name
from graphfix.source.vocabulary import PS_JOB_WORDS

if TYPE_CHECKING:
    from graphfix.source.project import Project

CLUSTER_SPEC = "train.ClusterSpec"
SERVERS = frozenset({"train.Server", "distribute.Server"})
# Words without which a file's text makes no cluster (conservative, as the pre-filter).
CLUSTER_WORDS = ("ClusterSpec", "Server")
SETTER = "replica_device_setter"
# Words without which a file's text opens no device scope on the ps job (`ps_scopes`).
PS_SCOPE_WORDS = (*PS_JOB_WORDS, SETTER)


def _ps_job(value: ast.expr | None, bound: dict[str, list[ast.expr]], depth: int = 0
            ) -> tuple[bool, int | None]:
    """(whether a cluster argument has a `'ps'` job, how many ps tasks its literal lists):
    a dict literal, a name bound to one, a name bound to a `ClusterSpec` of one."""
    if value is None or depth > 3:
        return False, None
    if isinstance(value, ast.Name):
        for given in bound.get(value.id, ()):
            found = _ps_job(given, bound, depth + 1)
            if found[0]:
                return found
        return False, None
    if isinstance(value, ast.Call) and value.args:
        return _ps_job(value.args[0], bound, depth + 1)  # ClusterSpec(dict), dict(...)
    if not isinstance(value, ast.Dict):
        return False, None
    for key, tasks in zip(value.keys, value.values):
        if isinstance(key, ast.Constant) and key.value == "ps":
            if isinstance(tasks, (ast.List, ast.Tuple, ast.Dict)):
                count = len(tasks.keys if isinstance(tasks, ast.Dict) else tasks.elts)
                return count > 0, count or None
            return True, None
    return False, None


def _places_on_ps(device: ast.expr) -> bool:
    """Whether a device scope's argument sends ops to the ps job: a string naming it, or
    the setter."""
    if isinstance(device, ast.Call) and tail_name(device.func) == SETTER:
        return True
    return any(text == "ps" or "job:ps" in text for text in strings_in(device))


def ps_scopes(tree: ast.Module) -> list[int]:
    """The lines of the file's device scopes on the ps job: a string naming it
    (`with tf.device('/job:ps/...')`, the job's name given by a format too), code there
    runs on the ps, cluster or not; or `replica_device_setter` (`with
    tf.device(tf.train.replica_device_setter(...))`), which sends the variables there: the
    program trains with a ps job wherever its cluster is made (by a caller this project
    cannot see, set on an object by reflection)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                call = item.context_expr
                # (by its spelling: a `device` imported through a helper module counts)
                if (isinstance(call, ast.Call) and tail_name(call.func) == "device"
                        and any(map(_places_on_ps, call_arguments(call)))):
                    found.append(node.lineno)
                    break
    return sorted(found)


def clusters(tree: ast.Module, names: AstTfNames) -> list[list]:
    """The file's clusters with a ps job: [line, ps task count or None] for every
    `ClusterSpec(...)` or `Server(...)` given one, in line order."""
    bound: dict[str, list[ast.expr]] = {}  # a name -> every value assigned to it
    calls = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            bound.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.Call):
            calls.append(node)
    found = []
    for call in calls:
        name = names.canonical(call.func)
        if name == CLUSTER_SPEC:
            given = argument(call, "cluster", 0)
        elif name in SERVERS:
            given = argument(call, "server_or_cluster_def", 0)
        else:
            continue
        has_ps, tasks = _ps_job(given, bound)
        if has_ps:
            found.append([call.lineno, tasks])
    return sorted(found, key=lambda c: c[0])


# -- which code runs with a cluster ----------------------------------------------------------

class ClusterPrograms:
    """The code of a project that runs with a cluster: `of` maps every such unit to its
    cluster (path, line, ps task count or None; the first by path and line where several
    reach it); `entries` are the units that make one or get one made (the program's
    entries: a `main` that no code of its file calls is one)."""

    def __init__(self, project: Project):
        from graphfix.source.project import unit_at  # (the package imports this module)

        made = sorted((label, line, tasks, unit_at(part, line))
                      for label, part in project.parts.items()
                      for line, tasks in part.get("clusters", ()))
        self.of: dict[tuple[str, str], tuple[str, int, int | None]] = {}
        self.entries: set[tuple[str, str]] = set()
        for label, line, tasks, unit in made:
            maker = (label, unit)
            starts = {maker} | {caller for caller in project.callers(maker)
                                if maker in project.references(*caller)}
            self.entries |= starts
            for member in _called(project, starts):
                self.of.setdefault(member, (label, line, tasks))


_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cluster_programs(project: Project) -> ClusterPrograms:
    """The project's `ClusterPrograms`, computed once per project."""
    if project not in _PROGRAMS:
        _PROGRAMS[project] = ClusterPrograms(project)
    return _PROGRAMS[project]


def _called(project: Project, starts: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """`starts` and the functions and classes they refer to, transitively (a module body
    that is only read a global from runs none of its calls for the reader)."""
    seen = set(starts)
    queue = deque(sorted(starts))
    while queue:
        for target in sorted(project.references(*queue.popleft())):
            kind = project.parts[target[0]]["units"][target[1]]["kind"]
            if kind in ("function", "class", "method") and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen
