"""`graphfix demo` runs every seed bug end to end on its built-in fixtures."""

import time

from conftest import run_cli


def test_demo_finds_fixes_and_verifies_every_seed():
    start = time.perf_counter()
    result = run_cli("demo", check_exit=0)
    elapsed = time.perf_counter() - start
    out = result.stdout
    assert "no supported kernel for GPU devices is available" in out
    assert "verification failed" in out, "the unfixed graph fails verify first"
    assert "found, fixed, verified: seed 000" in out
    assert "found, fixed, verified: seed 003" in out
    assert "update-op variable(s) never changed" in out
    assert "all 4 update-op variable(s) changed" in out
    assert "incompatible with expected float_ref" in out
    assert "found, fixed, verified: seed 003 Q&A (feed-to-assign)" in out
    assert "FAILED" not in out
    assert elapsed < 20, f"demo took {elapsed:.1f}s"
