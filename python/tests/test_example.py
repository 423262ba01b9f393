"""The PyTorch example runs end to end (skipped where torch is not installed:
it is the example's optional dependency, not the package's)."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "reinforce_torch.py"


def test_reinforce_torch_example_runs(data_copy):
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(EXAMPLE), "--db", str(data_copy("h200x2.db")), "--updates", "10",
                        "--samples", "4"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    for row in ("torch REINFORCE best sample", "torch REINFORCE greedy", "C REINFORCE", "C DP", "C exhaustive optimum"):
        assert row in r.stdout
