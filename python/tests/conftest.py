"""Fixtures for the placer package's tests: the repository, the `placer`
command they compare against, and private copies of the shipped profiles
(a test never opens a file in data/ itself)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _find_placer():
    env = os.environ.get("PLACER_BIN")
    if env:
        return Path(env)
    for cand in [ROOT / "build" / "cli" / "placer", *sorted(ROOT.glob("build*/cli/placer"))]:
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


@pytest.fixture(scope="session")
def placer_bin():
    """The `placer` command (PLACER_BIN, else build/cli/placer). Missing: the test fails, it does not skip."""
    p = _find_placer()
    if p is None or not p.is_file():
        pytest.fail("no `placer` binary: build it (ninja -C build) or set PLACER_BIN; the package's tests compare "
                    "against it")
    return p


@pytest.fixture(scope="session")
def data_copy(tmp_path_factory):
    """A function giving a private copy of a shipped profile, e.g. data_copy('h200x2.db')."""
    base = tmp_path_factory.mktemp("data")

    def copy(name, tag=""):
        dst = base / (tag + name)
        if not dst.exists():
            shutil.copyfile(ROOT / "data" / name, dst)
        return dst

    return copy


def run_placer(placer_bin, *args, check=True):
    """Run `placer ARGS`; returns the CompletedProcess (text)."""
    r = subprocess.run([str(placer_bin), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"placer {' '.join(map(str, args))} exited {r.returncode}: {r.stderr.strip()}")
    return r
