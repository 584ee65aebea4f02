"""The graph transforms on a traced graph, their findings and changes at the script's lines.

A graph finding is about a node; the node was made at a creation site (`Trace.sites`); the
findings of one transform at one site are one finding there (a layer that made twenty nodes
is one finding), with the graph's evidence in `details`: the nodes, each graph finding's
message and details. A node the user's files did not make (TF made it, at session time)
keeps its graph location, `SCRIPT@node`.
"""

from __future__ import annotations

from graphfix.driver import Selected, apply_to_graph
from graphfix.findings import SEVERITIES, Change, Finding
from graphfix.graph.index import VARIABLE_OPS
from graphfix.registry import OP_LIBRARY
from graphfix.trace import Site, Trace

FEED_TO_ASSIGN = "feed-to-assign"


def check_trace(trace: Trace, selected: Selected, *, fix: bool = False
                ) -> tuple[list[Finding], list[Change]]:
    """The selected graph transforms on `trace.meta_graph` (which a fix edits in place):
    (findings at their creation sites, changes at theirs). The graph is placed as the
    script's sessions place it: with soft placement where every one asked for it
    (`Trace.soft_placement`)."""
    fed = fed_variables(trace)
    graph_findings, graph_changes, _ = apply_to_graph(
        trace.meta_graph.graph_def, trace.meta_graph, trace.script,
        with_op_libraries(_with_feeds(selected, fed), trace.op_libraries), fix=fix,
        soft_placement=trace.soft_placement)
    if fix:  # (a fix's findings are its changes; apply_to_graph keeps none)
        return [], _changes_at_sites(trace, graph_changes)
    found = [f for f in findings_at_sites(trace, graph_findings) if not _ignored(f)]
    for finding in found:
        runs = [s for node in finding.details["nodes"] if finding.transform == FEED_TO_ASSIGN
                for s in fed.get(node, ()) if s is not None]
        if runs:
            finding.details["fed_at"] = [s.to_json() for s in runs]
            # (the transform says why it counts the variable as fed: here, the trace saw it)
            said = f"the Session.run at {runs[0].path}:{runs[0].line} feeds it"
            named = f"named by {FEED_TO_ASSIGN}.variables"
            finding.message = (finding.message.replace(named, said) if named in finding.message
                               else f"{finding.message} ({said})")
    return found, []


def _ignored(finding: Finding) -> bool:
    """Whether the user's `# graphfix: ignore[...]` covers a finding at its creation site,
    as it covers the codemod's finding there."""
    from pathlib import Path

    from graphfix.source.syntax import ignored_at

    if finding.line is None:
        return False
    try:
        code = Path(finding.path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return ignored_at(code, finding.line, finding.transform)


def fed_variables(trace: Trace) -> dict[str, list[Site | None]]:
    """Variable -> the sites of the train op's runs that feed it: what the graph alone
    cannot know (feed-to-assign's evidence). A variable fed in a run that does not train
    is fine, and not counted."""
    nodes = {n.name: n for n in trace.meta_graph.graph_def.node}
    fed: dict[str, list[Site | None]] = {}
    for run in trace.runs:
        if not run.train:
            continue
        for key in run.feeds:
            name = key.rpartition(":")[0] if ":" in key else key
            node = nodes.get(name)
            if node is not None and node.op == "Identity" and node.input:
                name = node.input[0].split(":")[0]  # (a variable's `read`)
                node = nodes.get(name)
            if node is not None and node.op in VARIABLE_OPS:
                fed.setdefault(name, []).append(run.site)
    return fed


def _with_feeds(selected: Selected, fed: dict) -> Selected:
    """`selected`, feed-to-assign (where it runs) told of the variables the trace saw fed."""
    if not fed:
        return selected
    transforms = []
    for transform, options in selected.transforms:
        if transform.name == FEED_TO_ASSIGN:
            named = list(options.get("variables") or ())
            options = {**options, "variables": named + [v for v in fed if v not in named]}
        transforms.append((transform, options))
    return Selected(transforms, selected.target_devices)


def given_op_libraries(selected: Selected) -> list[str]:
    """The custom-op libraries the user named (`OP_LIBRARY`), where stateful-custom-ops
    runs."""
    return [path for transform, options in selected.transforms
            if transform.name == OP_LIBRARY.transform
            for path in options.get(OP_LIBRARY.key) or ()]


def with_op_libraries(selected: Selected, libraries: list[str]) -> Selected:
    """`selected`, stateful-custom-ops (where it runs) reading its registrations from the
    custom-op libraries the traced script loaded, unless the user named libraries
    (`given_op_libraries`): those are what the user says the ops are."""
    if not libraries or given_op_libraries(selected):
        return selected
    transforms = []
    for transform, options in selected.transforms:
        if transform.name == OP_LIBRARY.transform:
            options = {**options, OP_LIBRARY.key: list(libraries)}
        transforms.append((transform, options))
    return Selected(transforms, selected.target_devices)


def _site_of(trace: Trace, node: str | None) -> Site | None:
    if node is None:
        return None
    return trace.sites.get(node.split(":")[0].lstrip("^"))


def findings_at_sites(trace: Trace, findings: list[Finding]) -> list[Finding]:
    """`findings` (a graph's, each with `node`) as findings at the lines that made their
    nodes, one per transform and site, in the order of their first graph finding."""
    groups: dict[tuple, list[tuple[Finding, Site | None]]] = {}
    for finding in findings:
        site = _site_of(trace, finding.node)
        key = (finding.transform, site.key() if site else ("@", finding.node))
        groups.setdefault(key, []).append((finding, site))
    out = []
    for members in groups.values():
        first, site = members[0]
        nodes = [f.node for f, _ in members]
        details = {"trace": trace.script, "nodes": nodes,
                   "graph_findings": [{"node": f.node, "message": f.message,
                                       "severity": f.severity, "details": f.details}
                                      for f, _ in members]}
        severity = min((f.severity for f, _ in members), key=SEVERITIES.index)
        fixable = any(f.fixable for f, _ in members)
        if site is None:
            out.append(Finding.as_recorded({**first.to_json(), "path": trace.script,
                                            "severity": severity, "fixable": fixable,
                                            "details": details}))
            continue
        details["site"] = site.to_json()
        message = first.message
        if len(members) > 1:
            message += f" (and {len(members) - 1} more node(s) made here: " \
                       f"{', '.join(nodes[1:4])}{', ...' if len(nodes) > 4 else ''})"
        out.append(Finding.as_recorded({
            "path": site.path, "transform": first.transform, "message": message,
            "fixable": fixable, "line": site.line, "col": site.col, "severity": severity,
            "details": details}))
    return out


def _changes_at_sites(trace: Trace, changes: list[Change]) -> list[Change]:
    """A fix's graph changes, each at the line that made its node (its node kept in
    `details`); a node the script's files did not make keeps its graph location. A change
    to another file (stateful-custom-ops' C++: `details["file"]`) stays at that file."""
    out = []
    for change in changes:
        if change.node is None and "file" in change.details:
            out.append(change)
            continue
        site = _site_of(trace, change.node)
        if site is None:
            out.append(change.replace(path=trace.script))
            continue
        out.append(Change(site.path, change.transform, change.description, line=site.line,
                          details={**change.details, "node": change.node}))
    return out
