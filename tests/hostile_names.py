"""Inputs a hostile user makes (tests/test_hostile_output.py, tests/test_hostile_names.py):
graphs whose node and device names hold control characters, line breaks, workflow
commands, HTML and bidi overrides, built from the seed 000 graph with TF's own protobuf
classes, and what each output format's own reader makes of graphfix's output."""

from __future__ import annotations

import re
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

from conftest import FIXTURES

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
# The seed's variable `d` on /device:GPU:0 (an int32 variable: no GPU kernel): one
# variables-to-cpu finding per copy, fixed by moving its group to the CPU.
GROUP = ("d/initial_value", "d", "d/Assign", "d/read")

# Every line a workflow command of graphfix's own: `::error|warning|notice props::data`,
# each property's value with no `:` or `,` (escaped as GitHub's spec says).
OWN_COMMAND = re.compile(r"::(error|warning|notice) [a-z]+=[^:,]*(?:,[a-z]+=[^:,]*)*::.*\Z")
# What a person must never get raw on a terminal (a tab is harmless): controls, line breaks,
# bidi controls, lone surrogates.
RAW = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                 "\u2066-\u2069\ud800-\udfff]")


def raw_characters(text: str) -> list[str]:
    """The characters of `text`'s lines (ended by LF, as graphfix writes them) that must not
    reach a terminal raw."""
    return [c for line in text.split("\n") for c in RAW.findall(line)]


def seed_graph() -> graph_pb2.GraphDef:
    graph = graph_pb2.GraphDef()
    text_format.Parse(SEED.read_text(), graph)
    return graph


def graph_with_variables(names: list[str], device: str = "/device:GPU:0"
                         ) -> graph_pb2.GraphDef:
    """The seed graph with, for each name, a copy of its variable `d` group named by it
    (`NAME`, `NAME/initial_value`, `NAME/Assign`, `NAME/read`) on `device`, in place of
    `d`'s own (and the nodes that read it)."""
    seed = seed_graph()
    originals = {node.name: node for node in seed.node}
    graph = graph_pb2.GraphDef()
    graph.versions.CopyFrom(seed.versions)
    for node in seed.node:
        if node.name not in (*GROUP, "init/NoOp_2", "output"):
            graph.node.add().CopyFrom(node)
            graph.node[-1].input[:] = [i for i in node.input if i != "^init/NoOp_2"]
    for name in names:
        def renamed(text: str) -> str:
            control = text.startswith("^")
            bare = text.lstrip("^")
            if bare == "d" or bare.startswith("d/"):
                bare = name + bare[1:]
            return ("^" if control else "") + bare

        for member in GROUP:
            node = graph.node.add()
            node.CopyFrom(originals[member])
            node.name = renamed(member)
            node.device = device
            node.input[:] = [renamed(i) for i in node.input]
            if "_class" in node.attr:
                node.attr["_class"].list.s[:] = [f"loc:@{name}".encode()]
    return graph


def write_graph(path: Path, graph: graph_pb2.GraphDef) -> Path:
    """`graph` as a .pb (binary) or .pbtxt (text) file at `path`."""
    if path.suffix == ".pbtxt":
        path.write_bytes(text_format.MessageToString(graph, as_utf8=True).encode())
    else:
        path.write_bytes(graph.SerializeToString())
    return path


def foreign_lines(text: str) -> list[str]:
    """The lines of graphfix's output that GitHub's runner would take for a workflow command
    that graphfix did not write: starting with `::` (after blanks) and not one of its own,
    or holding `##[` (the older syntax, read anywhere in a line). Lines split as broadly as
    any reader splits them (Python's `splitlines`: CR, LF, VT, FF, NEL, U+2028 ...)."""
    return [line for line in text.splitlines()
            if (line.lstrip().startswith("::") and not OWN_COMMAND.match(line))
            or ("##[" in line and not OWN_COMMAND.match(line))]


def unescape_data(text: str) -> str:
    """A workflow command's data, as the runner decodes it."""
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def unescape_property(text: str) -> str:
    """A workflow command's property value, as the runner decodes it."""
    return (text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":")
            .replace("%2C", ",").replace("%25", "%"))


def annotations(text: str) -> list[tuple[str, dict, str]]:
    """graphfix's workflow commands in `text`: (command, decoded properties, decoded data)."""
    out = []
    for line in text.splitlines():
        match = re.match(r"::(error|warning|notice) ([^:]*)::(.*)\Z", line)
        if match:
            props = dict(p.split("=", 1) for p in match.group(2).split(","))
            out.append((match.group(1), {k: unescape_property(v) for k, v in props.items()},
                        unescape_data(match.group(3))))
    return out


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


class DomText(HTMLParser):
    """A dumped DOM's tables, its text inside each table cell, and whether its script ran."""

    def __init__(self, dom: str):
        super().__init__(convert_charrefs=True)
        self.tables, self.cells, self._cell = 0, [], None
        self.rendered = 'data-rendered="ok"' in dom
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables += 1
        elif tag == "td":
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def rendered_dom(page: Path) -> DomText:
    """The page's DOM once headless Chromium (/usr/bin/chromium) ran its script."""
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                              "--dump-dom", page.as_uri()], capture_output=True, text=True,
                             errors="replace", timeout=120)
    assert dom.returncode == 0, (dom.returncode, dom.stdout[-2000:], dom.stderr[-2000:])
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == []
    return DomText(dom.stdout)


def as_dom_text(name: str) -> str:
    """`name` as it is read back from the DOM Chromium serialized: a CR (alone or before
    LF) is a LF."""
    return name.replace("\r\n", "\n").replace("\r", "\n")
