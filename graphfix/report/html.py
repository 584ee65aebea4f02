"""`graphfix report GRAPH... -o report.html`: one self-contained page (inline CSS, JS and
data; no network) showing, per graph, the ops and variable bytes per device before and
after the fix, the colocation groups the fix moved, the cross-device edges with the bytes
they carry per step, and every finding linked to its nodes.

The numbers come from graphfix.graph.placement (the same `device_totals` the JSON report's
placement notes print) and the findings are `Finding.to_json()`: the page embeds them as
one JSON document (`<script id="graphfix-data">`) which its script renders."""

from __future__ import annotations

import html
import json
import re

from graphfix.escaping import visible
from graphfix.findings import finding_record
from graphfix.graph import placement
from graphfix.graph.edges import parse_input, tensor_name
from graphfix.graph.index import GraphIndex

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # (in a str, a surrogate is always alone)
MAX_EDGES_LISTED = 200  # the 8-tower ResNet has thousands: the rest are counted per pair
MAX_SCOPES = 40  # name scopes shown per device; the rest are summed as "(other)"


def _scope(name: str) -> str:
    """A node's top-level name scope (grouping, not one box per node)."""
    return name.split("/", 1)[0] if "/" in name else "(top level)"


def _output_bytes(node, index: int) -> int | None:
    """Bytes of one output tensor per step from the node's `_output_shapes` and dtype, or
    None where a dimension or the dtype is unknown."""
    if "_output_shapes" not in node.attr:
        return None
    shapes = node.attr["_output_shapes"].list.shape
    dtype = None
    for key in ("T", "dtype", "SrcT", "DstT"):
        if key in node.attr and node.attr[key].type:
            dtype = node.attr[key].type
            break
    if index >= len(shapes) or dtype not in placement.DTYPE_BYTES:
        return None
    shape = shapes[index]
    if shape.unknown_rank:
        return None
    elements = 1
    for dim in shape.dim:
        if dim.size < 0:
            return None
        elements *= dim.size
    return elements * placement.DTYPE_BYTES[dtype]


def devices_section(graph: GraphIndex) -> list[dict]:
    """Per device: ops, variable bytes (placement.device_totals) and ops per name scope."""
    totals = placement.device_totals(graph)
    scopes: dict[str, dict[str, int]] = {device: {} for device in totals}
    for name, device in zip(graph.names, placement.node_devices(graph)):
        counts = scopes[device]
        counts[_scope(name)] = counts.get(_scope(name), 0) + 1
    out = []
    for device, (ops, size) in totals.items():
        ranked = sorted(scopes[device].items(), key=lambda kv: (-kv[1], kv[0]))
        shown = [{"scope": s, "ops": n} for s, n in ranked[:MAX_SCOPES]]
        rest = sum(n for _, n in ranked[MAX_SCOPES:])
        if rest:
            shown.append({"scope": "(other)", "ops": rest})
        out.append({"device": device, "ops": ops, "variable_bytes": size, "scopes": shown})
    return out


def moved_groups(before: GraphIndex, after: GraphIndex) -> list[dict]:
    """Colocation groups (by the fixed graph's groups) whose members that were in the
    graph before the fix changed devices (a node the fix added is `added_nodes`')."""
    was = dict(zip(before.names, placement.node_devices(before)))
    now_devices = placement.node_devices(after)
    out = []
    for root, positions in after.colocation_groups().items():
        kept = [p for p in positions if after.names[p] in was]
        old = sorted({was[after.names[p]] for p in kept})
        new = sorted({now_devices[p] for p in kept})
        if kept and old != new:
            members = [after.names[p] for p in positions]
            out.append({"group": root, "members": len(members), "before": old, "after": new,
                        "nodes": members[:20]})
    return out


def added_nodes(before: GraphIndex, after: GraphIndex) -> dict:
    """The nodes the fix added (not in the graph before it): their count and the first
    MAX_EDGES_LISTED, each with its op and device."""
    devices = placement.node_devices(after)
    added = [(position, name) for position, name in enumerate(after.names)
             if name not in before]
    return {"total": len(added),
            "nodes": [{"node": name, "op": after.node(name).op, "device": devices[position]}
                      for position, name in added[:MAX_EDGES_LISTED]]}


def edge_growth(before: dict, after: dict) -> list[dict]:
    """The device pairs whose cross-device edges the fix made more (`cross_device_edges`
    of the graph before and after): edges and known bytes per step, before and after."""
    was = {(p["from"], p["to"]): p for p in before["pairs"]}
    grew = []
    for pair in after["pairs"]:
        old = was.get((pair["from"], pair["to"]),
                      {"edges": 0, "bytes_known": 0, "unknown_size": 0})
        if pair["edges"] > old["edges"] or pair["bytes_known"] > old["bytes_known"]:
            grew.append({"from": pair["from"], "to": pair["to"], "edges_before": old["edges"],
                         "edges_after": pair["edges"], "bytes_before": _known_bytes(old),
                         "bytes_after": _known_bytes(pair)})
    return grew


def _known_bytes(pair: dict) -> int | None:
    """A device pair's bytes per step; None (unknown, not 0) where no edge's size is known."""
    if pair["edges"] and pair["unknown_size"] == pair["edges"]:
        return None
    return pair["bytes_known"]


def cross_device_edges(graph: GraphIndex) -> dict:
    """Data edges whose two ends are on different devices: per device pair, the edge
    count and the bytes per step where every shape is known; the first edges listed."""
    devices = placement.node_devices(graph)
    pairs: dict[tuple[str, str], dict] = {}
    listed = []
    for position, node in enumerate(graph):
        for text in graph.inputs(position):
            if text.startswith("^"):
                break
            source, index = parse_input(text)
            if source not in graph:
                continue
            src_device, dst_device = devices[graph.position(source)], devices[position]
            if src_device == dst_device:
                continue
            size = _output_bytes(graph.node(source), index)
            pair = pairs.setdefault((src_device, dst_device),
                                    {"from": src_device, "to": dst_device, "edges": 0,
                                     "bytes_known": 0, "unknown_size": 0})
            pair["edges"] += 1
            if size is None:
                pair["unknown_size"] += 1
            else:
                pair["bytes_known"] += size
            if len(listed) < MAX_EDGES_LISTED:
                listed.append({"tensor": tensor_name(source, index), "consumer": node.name,
                               "from": src_device, "to": dst_device, "bytes": size})
    total = sum(p["edges"] for p in pairs.values())
    return {"pairs": list(pairs.values()), "edges": listed, "total": total}


def graph_section(label: str, before: GraphIndex, after: GraphIndex, findings: list,
                  changes: list) -> dict:
    """One graph's part of the page's data."""
    edges_before, edges_after = cross_device_edges(before), cross_device_edges(after)
    return {
        "path": label,
        "nodes": len(after),
        "devices_before": devices_section(before),
        "devices_after": devices_section(after),
        "moved_groups": moved_groups(before, after),
        "added": added_nodes(before, after),
        "cross_device_before": edges_before,
        "cross_device_after": edges_after,
        "cross_device_growth": edge_growth(edges_before, edges_after),
        "findings": [finding_record(f) for f in findings],
        "changes": len(changes),
    }


def render(graphs: list[dict], verify: list[dict] | None = None, failed: list | None = None
           ) -> str:
    """The page: the data as embedded JSON and the script and style that show it."""
    data = {"graphs": graphs, "verify": verify or [], "failed": failed or []}
    # Every "<" written as JSON's \u003c: in a <script>, "</script" would end it and "<!--"
    # (then "<script") would put the rest of the page in the parser's escaped state, where
    # the data never ends and nothing is drawn. A lone surrogate (a file name's byte no
    # codec decoded) is written as its visible escape, `\xc0`: no UTF-8 page holds it, and
    # a DOM holding one crashed Chromium's --dump-dom.
    payload = _LONE_SURROGATE.sub(lambda m: json.dumps(visible(m.group()))[1:-1],
                                  json.dumps(data, indent=1, ensure_ascii=False))
    payload = payload.replace("<", "\\u003c")
    title = html.escape(visible(", ".join(g["path"] for g in graphs) or "graphfix report"))
    return _PAGE.replace("@TITLE@", title).replace("@DATA@", payload)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>graphfix report: @TITLE@</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:10px;background:#4a7fd0;vertical-align:middle}
.sev-error{color:#b00}.sev-warning{color:#a60}.node{font-family:monospace}
.cols{display:flex;gap:2em;flex-wrap:wrap}
</style></head><body>
<h1>graphfix report</h1>
<div id="report"></div>
<script type="application/json" id="graphfix-data">@DATA@</script>
<script>
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("graphfix-data").textContent);
  const root = document.getElementById("report");
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const kid of kids) e.append(kid instanceof Node ? kid : String(kid));
    return e;
  }
  function table(head, rows) {
    const t = el("table", {}, el("tr", {}, ...head.map(h => el("th", {}, h))));
    for (const r of rows) t.append(el("tr", {}, ...r.map(c =>
      c instanceof Node ? el("td", {}, c) : el("td", typeof c === "number" ? {class: "n"} : {}, c))));
    return t;
  }
  // Bytes as a person reads them (binary units); the exact count in the cell's title.
  function size(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? n + " B" : v.toFixed(1) + " " + units[i];
  }
  function bytes(n) { return el("span", {class: "n", title: n + " bytes"}, size(n)); }
  function devices(list, which) {
    const box = el("div", {"data-section": which}, el("h3", {}, which.replace("_", " ")));
    const most = Math.max(1, ...list.map(d => d.ops));
    box.append(table(["device", "ops", "variable bytes", ""], list.map(d => [
      el("span", {"data-device": d.device, "data-ops": d.ops, "data-variable-bytes": d.variable_bytes}, d.device),
      d.ops, bytes(d.variable_bytes), el("span", {class: "bar", style: "width:" + Math.round(200 * d.ops / most) + "px"})])));
    for (const d of list) {
      const det = el("details", {}, el("summary", {}, d.device + ": ops by name scope"));
      det.append(table(["scope", "ops"], d.scopes.map(s => [s.scope, s.ops])));
      box.append(det);
    }
    return box;
  }
  function edges(x, which) {
    const box = el("div", {"data-section": which}, el("h3", {}, which.replace(/_/g, " ") + " (" + x.total + " edges)"));
    // No edge of a pair of known size: its bytes are unknown, not 0.
    box.append(table(["from", "to", "edges", "bytes per step (known shapes)", "edges of unknown size"],
      x.pairs.map(p => [p.from, p.to, p.edges,
        p.unknown_size === p.edges ? "unknown" : bytes(p.bytes_known), p.unknown_size])));
    if (x.edges.length) {
      const det = el("details", {}, el("summary", {}, "first " + x.edges.length + " edges"));
      det.append(table(["tensor", "consumer", "from", "to", "bytes"], x.edges.map(e =>
        [e.tensor, e.consumer, e.from, e.to, e.bytes === null ? "unknown" : bytes(e.bytes)])));
      box.append(det);
    }
    return box;
  }
  data.graphs.forEach((g, i) => {
    const sec = el("section", {id: "graph-" + i, "data-path": g.path});
    sec.append(el("h2", {}, g.path + " (" + g.nodes + " nodes, " + g.findings.length +
      " finding(s), " + g.changes + " change(s))"));
    sec.append(el("div", {class: "cols"}, devices(g.devices_before, "devices_before"),
      devices(g.devices_after, "devices_after")));
    sec.append(el("h3", {}, "colocation groups moved by the fix (" + g.moved_groups.length + ")"));
    // Per move (devices before -> after) first: the 8-tower ResNet moves 272 groups.
    const moves = new Map();
    for (const m of g.moved_groups) {
      const key = m.before.join(", ") + " \u2192 " + m.after.join(", ");
      const seen = moves.get(key) || {groups: 0, members: 0};
      seen.groups += 1; seen.members += m.members; moves.set(key, seen);
    }
    sec.append(table(["move", "groups", "nodes"], [...moves].map(([k, v]) => [k, v.groups, v.members])));
    const groupList = el("details", {}, el("summary", {}, "every moved group"));
    groupList.append(table(["group", "members", "before", "after"], g.moved_groups.map(m => [
      el("span", {class: "node", id: "g" + i + "-group-" + m.group}, m.group), m.members,
      m.before.join(", "), m.after.join(", ")])));
    sec.append(groupList);
    sec.append(el("h3", {}, "nodes added by the fix (" + g.added.total + ")"));
    if (g.added.total) {
      const det = el("details", {"data-section": "added"}, el("summary", {},
        g.added.total > g.added.nodes.length ? "first " + g.added.nodes.length + " added nodes" : "every added node"));
      det.append(table(["node", "op", "device"], g.added.nodes.map(a => [
        el("span", {class: "node"}, a.node), a.op, a.device])));
      sec.append(det);
    }
    sec.append(el("div", {class: "cols"}, edges(g.cross_device_before, "cross_device_before"),
      edges(g.cross_device_after, "cross_device_after")));
    if (g.cross_device_growth.length) {
      const more = g.cross_device_after.total - g.cross_device_before.total;
      const box = el("div", {"data-section": "cross_device_growth"},
        el("h3", {}, "cross-device edges the fix adds"),
        el("p", {}, (more > 0 ? "The fixed graph has " + more + " more cross-device edge(s) than the original. "
          : "Some device pairs carry more after the fix. ") +
          "The fix moved ops off the device of the ops that read them (a variable with no kernel on its GPU " +
          "onto the CPU, a colocation group onto one device, towers onto one shared copy), so TF copies " +
          "those tensors between devices at every step. That is the price of a graph TF can place and run " +
          "as intended; weigh the bytes per step below against the step's compute " +
          "(graphfix verify --logdir shows where TF put each node, and the step's time and memory)."));
      box.append(table(["from", "to", "edges before", "edges after", "bytes per step before", "bytes per step after"],
        g.cross_device_growth.map(p => [p.from, p.to, p.edges_before, p.edges_after,
          p.bytes_before === null ? "unknown" : bytes(p.bytes_before),
          p.bytes_after === null ? "unknown" : bytes(p.bytes_after)])));
      sec.append(box);
    }
    sec.append(el("h3", {}, "findings"));
    sec.append(table(["severity", "transform", "node", "message"], g.findings.map(f => [
      el("span", {class: "sev-" + f.severity}, f.severity), f.transform,
      f.node ? el("a", {href: "#g" + i + "-node-" + f.node, class: "node"}, f.node) : "",
      f.message])));
    const nodes = [...new Set(g.findings.map(f => f.node).filter(Boolean))];
    if (nodes.length) {
      sec.append(el("h3", {}, "nodes named by findings"));
      sec.append(el("ul", {}, ...nodes.map(n => el("li", {id: "g" + i + "-node-" + n, class: "node"}, n))));
    }
    root.append(sec);
  });
  if (data.verify.length) {
    root.append(el("h2", {}, "verify"));
    root.append(table(["check", "passed", "detail"], data.verify.map(c => [c.name, String(c.passed), c.detail || ""])));
  }
  for (const f of data.failed) root.append(el("p", {class: "sev-error"}, f.path + ": " + f.error));
  document.body.setAttribute("data-rendered", "ok");
})();
</script></body></html>
"""


def build(paths: list[str], selected, verify: list[dict] | None = None
          ) -> tuple[str, list[dict]]:
    """The page for these graph files: each is checked (findings) and fixed in memory
    (the moved groups, the devices after); no file is written. A file that cannot be read
    is returned in the failed list ({"path", "error"}) and shown on the page. `verify`: a
    verify's checks (`VerifyResult.to_json()["checks"]`), shown after the graphs."""
    from graphfix.driver import apply_to_graph
    from graphfix.graph import graphfile
    from graphfix.graph.index import GraphError, index_for

    graphs, failed = [], []
    for path in paths:
        try:
            checked, fixed = graphfile.load(path), graphfile.load(path)
            for (g_check, meta_check), (g_fix, meta_fix) in zip(checked.graph_defs(),
                                                                  fixed.graph_defs()):
                findings, _, _ = apply_to_graph(g_check, meta_check, path, selected, fix=False)
                before = index_for(g_check, meta_check)
                _, changes, after = apply_to_graph(g_fix, meta_fix, path, selected, fix=True)
                graphs.append(graph_section(path, before, after, findings, changes))
        except (graphfile.InputError, GraphError, ValueError) as exc:
            failed.append({"path": path, "error": str(exc).removeprefix(f"{path}: ")})
    return render(graphs, verify=verify, failed=failed), failed
