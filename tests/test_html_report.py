"""`graphfix report GRAPH... -o FILE.html`: the page's numbers are the JSON report's, and a
real headless Chromium loads it without console errors and draws it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import FIXTURES
from graphfix.report import html as html_report

sys.path.insert(0, str(FIXTURES))

REPO = Path(__file__).resolve().parents[1]
DEMO_GRAPHS = [FIXTURES / "variables_to_cpu/seed000_ref/before.pbtxt",
               FIXTURES / "update_ops/two_tower_slim_bn/before.pbtxt",
               FIXTURES / "feed_to_assign/embeddings_ref/before.pbtxt",
               FIXTURES / "shared_variables/two_tower_variables/before.pbtxt"]
SEED_FIXED = FIXTURES / "variables_to_cpu/seed000_ref/after.pbtxt"
TARGETS = ("--target-devices", "/gpu:0")  # as `graphfix demo` checks its seeds
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


def _graphfix(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "graphfix", *args], capture_output=True,
                          text=True, env=env, timeout=600)


class _Data(HTMLParser):
    """The page's embedded JSON document and whether it loads anything from outside."""

    def __init__(self):
        super().__init__()
        self.data, self._in_data, self.external = "", False, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._in_data = attrs.get("id") == "graphfix-data"
        for key in ("src", "href"):
            if attrs.get(key) and not attrs[key].startswith("#"):
                self.external.append(attrs[key])

    def handle_endtag(self, tag):
        self._in_data = False

    def handle_data(self, data):
        if self._in_data:
            self.data += data


@pytest.fixture(scope="module")
def resnet_graph(tmp_path_factory) -> Path:
    """A 2-tower tf-slim ResNet v2 training graph with its output shapes (so the
    cross-device edges have bytes)."""
    import models

    graph = models.multi_tower("resnet_v2", towers=2, use_resource=False, image_size=16)
    path = tmp_path_factory.mktemp("resnet") / "resnet2.pb"
    path.write_bytes(graph.as_graph_def(add_shapes=True).SerializeToString())
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory, resnet_graph) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pages")
    out = {}
    for name, graphs in (("demo", DEMO_GRAPHS), ("resnet", [resnet_graph])):
        out[name] = folder / f"{name}.html"
        done = _graphfix("report", *TARGETS, *map(str, graphs), "-o", str(out[name]))
        assert done.returncode == 0, done.stderr
        assert f"report written to {out[name]}" in done.stdout
    # verify --html: the page of the graph it verified, with its checks
    out["verify"] = folder / "verify.html"
    done = _graphfix("verify", str(SEED_FIXED), "--format", "json", "--html", str(out["verify"]))
    assert done.returncode == 0, done.stderr
    out["verify.json"] = folder / "verify.json"
    out["verify.json"].write_text(done.stdout)
    return out


def _page_data(path: Path) -> dict:
    parser = _Data()
    parser.feed(path.read_text())
    assert parser.external == []  # self-contained: nothing fetched
    return json.loads(parser.data)


@pytest.mark.parametrize("which", ["demo", "resnet"])
def test_page_numbers_equal_the_json_report(pages, resnet_graph, which):
    graphs = DEMO_GRAPHS if which == "demo" else [resnet_graph]
    data = _page_data(pages[which])
    assert [g["path"] for g in data["graphs"]] == [str(g) for g in graphs]
    checked = _graphfix("check", *TARGETS, "--format", "json", *map(str, graphs))
    assert checked.returncode == 1, checked.stderr  # every one of these has a finding
    doc = json.loads(checked.stdout)
    for graph in data["graphs"]:
        # findings: the same records as the JSON report's
        assert graph["findings"] == [f for f in doc["findings"] if f["path"] == graph["path"]]
        # devices before the fix: the JSON report's placement note, number for number
        note = next(n for n in doc["notes"] if n.startswith(f"{graph['path']}: placement: "))
        listed = [re.fullmatch(r"(.+): (\d+) op\(s\), (\d+) variable byte\(s\)", line).groups()
                  for line in note.split(": placement: ", 1)[1].split("; ")]
        assert [(d["device"], d["ops"], d["variable_bytes"]) for d in graph["devices_before"]
                ] == [(device, int(ops), int(size)) for device, ops, size in listed]
        assert sum(d["ops"] for d in graph["devices_after"]) == graph["nodes"]
    # (the fed embeddings' bug is found only with its feed: `verify --feed`)
    assert all(g["findings"] for g in data["graphs"] if "embeddings" not in g["path"])
    assert any(g["changes"] and g["moved_groups"] for g in data["graphs"])


def test_resnet_page_groups_by_scope_and_counts_edge_bytes(pages):
    graph = _page_data(pages["resnet"])["graphs"][0]
    for device in graph["devices_after"]:
        assert len(device["scopes"]) <= 41  # scopes, not one box per node
        assert sum(s["ops"] for s in device["scopes"]) == device["ops"]
    after = graph["cross_device_after"]
    assert after["total"] == sum(p["edges"] for p in after["pairs"]) > 0
    assert any(p["bytes_known"] > 0 for p in after["pairs"])  # from the graph's shapes
    moved = {tuple(m["after"]) for m in graph["moved_groups"]}
    assert ("/device:CPU:0",) in moved  # the tower variables' groups went to the CPU


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("chromium is missing: `make install` installs it as root "
                    "(apt-get install -y chromium)")
    return found


def _rendered(page: Path) -> str:
    """The page's DOM once headless Chromium ran its script, which must run to its end
    without a line in the console."""
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                              "--dump-dom", page.as_uri()], capture_output=True, text=True,
                             timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-rendered="ok"' in dom.stdout  # the page's script ran to its end
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == []
    return dom.stdout


@pytest.mark.parametrize("which", ["demo", "resnet", "verify"])
def test_page_loads_in_headless_chromium(pages, which, tmp_path):
    chromium = _chromium()
    url = pages[which].as_uri()
    dom = _rendered(pages[which])
    assert "colocation groups moved by the fix" in dom
    if which == "verify":  # its checks drawn as a table after the graph
        assert re.search(r"<h2>verify</h2><table>.*<td>placement</td><td>true</td>", dom)
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               "--window-size=1200,1600", f"--screenshot={shot}", url],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    from PIL import Image

    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20  # text and bars, not a blank page
    assert any(rgb == (0x4a, 0x7f, 0xd0) for _, rgb in colours)  # the device bars drawn


def test_eight_tower_resnet50_page_draws_scopes_not_nodes(tmp_path):
    """The benchmark's 8-tower tf-slim ResNet-50 v2 (25,794 nodes; built once into
    bench-out/, as `make bench` does): the page draws per device its name scopes, the moved
    groups and the first cross-device edges, so its elements are a fraction of the nodes."""
    sys.path.insert(0, str(FIXTURES / "bench"))
    import make_graphs

    info = make_graphs.ensure(make_graphs.DEFAULT_OUT, "resnet")
    graph = make_graphs.DEFAULT_OUT / make_graphs.FILES["resnet"]
    page = tmp_path / "resnet50_x8.html"
    done = _graphfix("report", *TARGETS, str(graph), "-o", str(page))
    assert done.returncode == 0, done.stderr
    [data] = _page_data(page)["graphs"]
    assert data["nodes"] == info["nodes"] > 25_000 and info["towers"] == 8
    assert {d["device"] for d in data["devices_before"]} >= {f"/device:GPU:{k}" for k in range(8)}
    for device in data["devices_before"] + data["devices_after"]:
        assert len(device["scopes"]) <= html_report.MAX_SCOPES + 1  # "(other)" sums the rest
    dom = _rendered(page)
    elements = len(re.findall(r"<[a-z][a-z0-9]*[\s>]", dom))
    assert elements < data["nodes"] / 4  # (about 5,100 when written: a few per row)
    assert "colocation groups moved by the fix" in dom


def test_a_broken_graph_is_one_line_and_no_page(tmp_path):
    broken = tmp_path / "broken.pbtxt"
    broken.write_text("node { name: ")
    page = tmp_path / "r.html"
    done = _graphfix("report", str(broken), "-o", str(page))
    assert done.returncode == 2
    assert done.stderr.startswith("graphfix: error: ") and str(broken) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not page.exists()


def test_check_and_fix_html_are_the_report_page(pages, tmp_path):
    page = tmp_path / "check.html"
    done = _graphfix("check", *TARGETS, *map(str, DEMO_GRAPHS), "--format", "json",
                     "--html", str(page))
    assert done.returncode == 1, done.stderr
    json.loads(done.stdout)  # stdout stays the JSON document
    assert _page_data(page) == _page_data(pages["demo"])
    fixed, page = tmp_path / "fixed.pbtxt", tmp_path / "fix.html"
    done = _graphfix("fix", *TARGETS, str(DEMO_GRAPHS[0]), "-o", str(fixed), "--html", str(page))
    assert done.returncode == 1, done.stderr
    [graph] = _page_data(page)["graphs"]
    assert graph["path"] == str(DEMO_GRAPHS[0]) and graph["changes"] > 0


def test_verify_html_shows_the_checks_verify_reported(pages):
    data = _page_data(pages["verify"])
    checks = json.loads(pages["verify.json"].read_text())["checks"]
    assert data["verify"] == checks and {c["name"] for c in checks} >= {"placement", "run"}
    [graph] = data["graphs"]
    assert graph["path"] == str(SEED_FIXED) and graph["findings"] == []


def test_html_of_no_graph_is_one_line_and_no_page(tmp_path):
    source, page = tmp_path / "train.py", tmp_path / "r.html"
    source.write_text("import tensorflow as tf\n")
    done = _graphfix("check", str(source), "--html", str(page))
    assert done.returncode == 2 and not page.exists()
    assert done.stderr == ("graphfix: error: --html shows graphs: give a graph file (.pb, "
                           ".pbtxt, .meta, SavedModel)\n")


# -- what the page says of sizes, added nodes and the edges a fix adds (small graphs) ---------

def _int_counts_on_a_gpu(path: Path) -> Path:
    """A 2 MiB int32 variable pinned to /gpu:0 (no GPU kernel: variables-to-cpu moves it
    to the CPU) that a GPU op reads, with its output shapes: after the fix, 2 MiB a step
    cross from the CPU to the GPU."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default(), tf.device("/gpu:0"):
        counts = tf.compat.v1.Variable(tf.zeros([1024, 512], tf.int32), name="counts",
                                       use_resource=False)
        weights = tf.compat.v1.Variable(tf.zeros([256, 256]), name="weights",
                                        use_resource=False)
        tf.add(tf.cast(counts, tf.float32)[:256, :256], weights, name="out")
    path.write_bytes(graph.as_graph_def(add_shapes=True).SerializeToString())
    return path


def test_page_shows_sizes_readable_and_explains_the_edges_the_fix_adds(tmp_path):
    graph, page = _int_counts_on_a_gpu(tmp_path / "counts.pb"), tmp_path / "r.html"
    done = _graphfix("report", *TARGETS, str(graph), "-o", str(page))
    assert done.returncode == 0, done.stderr
    [data] = _page_data(page)["graphs"]
    assert data["cross_device_before"]["total"] == 0
    assert {(p["from"], p["to"], p["edges_before"], p["edges_after"], p["bytes_after"])
            for p in data["cross_device_growth"]} >= {
        ("/device:CPU:0", "/device:GPU:0", 0, 1, 2 * 1024 * 1024)}
    dom = _rendered(page)
    assert "<td>2.0 MiB</td>" in re.sub(r'<span class="n" title="\d+ bytes">([^<]*)</span>',
                                        r"\1", dom)
    assert 'title="2097152 bytes">2.0 MiB</span>' in dom  # (the exact count, on hover)
    assert "cross-device edges the fix adds" in dom
    assert "The fixed graph has 2 more cross-device edge(s) than the original." in dom
    assert "TF copies those tensors between devices at every step" in dom


def test_page_says_unknown_sizes_and_shows_added_nodes_as_added(tmp_path):
    graph = FIXTURES / "average_gradients/tower0_indices/before.pbtxt"  # no output shapes
    page = tmp_path / "r.html"
    done = _graphfix("report", *TARGETS, str(graph), "-o", str(page))
    assert done.returncode == 0, done.stderr
    [data] = _page_data(page)["graphs"]
    # the fix's new nodes (the sparse average) are added, not groups moved from nowhere
    assert data["added"]["total"] == 5
    assert {a["node"] for a in data["added"]["nodes"]} >= {"Mean/sparse/average"}
    assert all(m["before"] for m in data["moved_groups"])
    assert [(m["group"], m["before"], m["after"]) for m in data["moved_groups"]] == [
        ("w", ["/device:GPU:0"], ["/device:CPU:0"])]
    dom = _rendered(page)
    assert "nodes added by the fix (5)" in dom
    assert "<td>Mean/sparse/average</td>" in re.sub(r'<span class="node">([^<]*)</span>',
                                                    r"\1", dom)
    # no edge of a pair has a known size: its bytes per step are unknown, not 0
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td class=\"n\">(\d+)</td>"
                      r"<td>([^<]*)</td><td class=\"n\">(\d+)</td></tr>", dom)
    assert rows and all(bytes_shown == "unknown" for _, _, _, bytes_shown, _ in rows), rows
