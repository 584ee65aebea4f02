"""`graphfix demo` runs every seed bug end to end on its built-in fixtures."""

import json
import re
from pathlib import Path

from conftest import run_cli


def test_demo_finds_fixes_and_verifies_every_seed():
    result = run_cli("demo", check_exit=0)
    out = result.stdout
    assert "no supported kernel for GPU devices is available" in out
    assert "verification failed" in out, "the unfixed graph fails verify first"
    assert "found, fixed, verified: seed 000" in out
    assert "found, fixed, verified: seed 003" in out
    assert "update-op variable(s) never changed" in out
    assert "all 4 update-op variable(s) changed" in out
    assert "incompatible with expected float_ref" in out
    assert "found, fixed, verified: seed 003 Q&A (feed-to-assign)" in out
    assert "tower_1/w unchanged after the step" in out
    assert "tower tower_1 holds its own copy of 2 variable(s) of tower_0" in out
    assert "found, fixed, verified: seed 003 sharing (shared-variables)" in out
    assert "FAILED" not in out
    # `make demo` writes the HTML report of its seed graphs and says where it is
    [where] = [line for line in out.splitlines()
               if line.startswith("HTML report of the seed graphs: ")]
    page = Path(where.split(": ", 1)[1]).read_text()
    data = re.search(r'<script type="application/json" id="graphfix-data">(.*?)</script>',
                     page, re.S).group(1)
    graphs = json.loads(data.replace("<\\/", "</"))["graphs"]
    assert len(graphs) == 4 and all(g["findings"] or "embeddings" in g["path"] for g in graphs)
