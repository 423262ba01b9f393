"""Session.simulate (the batch call) against `placer simulate`, bit for bit,
and against the other ways of evaluating the same placement."""

import json

import numpy as np
import pytest

import placer
from conftest import run_placer

# (profile, micro-batches, schedule, memory cap): m=1 and pipelined schedules,
# a cap under which some placements run out of memory, and 4 devices over PCIe
SETTINGS = [
    ("h200x2.db", 1, "gpipe", None),
    ("h200x2.db", 4, "1f1b", None),
    ("h200x2.db", 2, "gpipe", "2GB"),
    ("t4x4-pcie.db", 2, "1f1b", None),
]


def placements_for(s, rng):
    """Random node placements, random group placements expanded, and every single device."""
    rows = [rng.integers(0, s.n_devices, s.n_nodes) for _ in range(8)]
    rows += list(s.to_nodes(rng.integers(0, s.n_devices, (4, s.n_groups))))
    rows += [np.full(s.n_nodes, d) for d in range(s.n_devices)]
    return np.array(rows, dtype=np.int32)


@pytest.mark.parametrize("db,m,order,cap", SETTINGS)
def test_batch_equals_placer_simulate_bit_for_bit(placer_bin, data_copy, db, m, order, cap):
    path = data_copy(db)
    s = placer.Session(db=path, micro_batches=m, schedule=order, mem_cap=cap, threads=2)
    rows = placements_for(s, np.random.default_rng(m * 7 + len(db)))
    res = s.simulate(rows)
    n_oom = 0
    for i, row in enumerate(rows):
        args = ["simulate", "--db", path, "--placement", ",".join(map(str, row)), "--micro-batches", m,
                "--schedule", order, "--json"]
        if cap:
            args += ["--mem-cap", cap]
        out = json.loads(run_placer(placer_bin, *args).stdout)
        assert out["params"]["source"] == ("calibrated" if s.calibrated else "neutral")
        assert res.step_us[i] == out["step_us_exact"], f"row {i}"  # exact: %.17g round-trips the double
        assert bool(res.oom[i]) == out["oom"]
        assert res.oom_device[i] == (out["oom_device"] if out["oom"] else -1)
        assert res.devices_used[i] == out["devices_used"]
        for d, dev in enumerate(out["devices"]):
            assert res.peak_bytes[i, d] == dev["peak_bytes"]
            assert f"{res.busy_us[i, d]:.3f}" == f"{dev['busy_us']:.3f}"
        assert res.cost_us[i] == (placer.OOM_PENALTY_US if out["oom"] else out["step_us_exact"])
        n_oom += out["oom"]
    if cap:
        assert 0 < n_oom < len(rows), "the capped setting should mix OOM and fitting placements"


def test_batch_equals_single_evaluations_groups_and_threads(data_copy):
    path = data_copy("h200x2.db")
    rng = np.random.default_rng(11)
    s1 = placer.Session(db=path, micro_batches=4, schedule="1f1b", threads=1)
    s2 = placer.Session(db=path, micro_batches=4, schedule="1f1b", threads=2)
    units = rng.integers(0, 2, (300, s1.n_groups)).astype(np.int32)
    a = s1.simulate(units)                    # group form
    b = s2.simulate(s2.to_nodes(units))       # node form, two threads
    assert np.array_equal(a.step_us, b.step_us)
    assert np.array_equal(a.peak_bytes, b.peak_bytes)
    assert np.array_equal(a.oom, b.oom)
    for i in range(0, 300, 37):
        step, cost, peak, oom, used = s1.evaluate(units[i])
        assert step == a.step_us[i] and cost == a.cost_us[i] and oom == a.oom[i]
        assert peak == a.peak_bytes[i].max() and used == a.devices_used[i]
    # a list works as well as an array, and an empty batch is fine
    assert s1.evaluate(units[0].tolist())[0] == a.step_us[0]
    assert s1.evaluate(units[0].astype(np.int64))[0] == a.step_us[0]
    assert s1.evaluate(s1.to_nodes(units[0])[::-1][::-1].copy())[0] == a.step_us[0]
    assert len(s1.simulate(np.zeros((0, s1.n_nodes), dtype=np.int32))) == 0


def test_spec_session_matches_database_of_the_same_spec(data_copy):
    # data/h200x4-spec.db is the h200x4-nvlink spec stored in a file
    s_db = placer.Session(db=data_copy("h200x4-spec.db"), micro_batches=2, schedule="1f1b", calibrated=False)
    s_mem = placer.Session(spec="h200x4-nvlink", micro_batches=2, schedule="1f1b")
    assert s_db.n_devices == s_mem.n_devices == 4
    rows = np.random.default_rng(5).integers(0, 4, (50, s_db.n_nodes))
    a, b = s_db.simulate(rows), s_mem.simulate(rows)
    np.testing.assert_allclose(a.step_us, b.step_us, rtol=1e-9)
    assert "h200x4-nvlink" in placer.spec_names()


def test_mem_cap_forms_agree(data_copy):
    db = data_copy("h200x2.db")
    caps = [placer.Session(db=db, mem_cap=c).cap_bytes for c in ("2GB", 2_000_000_000, "0.5", 0.5, "50%")]
    assert caps[0].tolist() == caps[1].tolist() == [2_000_000_000] * 2
    assert caps[2].tolist() == caps[3].tolist() == caps[4].tolist()


def test_trace_matches_placer_simulate_trace(placer_bin, data_copy, tmp_path):
    db = data_copy("h200x2.db")
    s = placer.Session(db=db, micro_batches=4, schedule="1f1b")
    units = [0] * 7 + [1] * 6
    step, events, crit = s.trace(units, tmp_path / "py.json")
    assert step == s.evaluate(units)[0]
    assert len(events) > 4 * 2 * s.n_nodes and set(events["kind"]) >= {"F", "B", "adamw", "act", "grad"}
    assert crit[0]["start_us"] == 0 and np.all(crit["start_us"][1:] >= crit["end_us"][:-1] - 1e-9)
    nodes = ",".join(map(str, s.to_nodes(units)))
    run_placer(placer_bin, "simulate", "--db", db, "--placement", nodes, "--micro-batches", 4, "--schedule", "1f1b",
               "--trace", tmp_path / "cli.json")
    assert (tmp_path / "py.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    json.loads((tmp_path / "py.json").read_text())
    with pytest.raises(placer.PlacerError, match="cannot write trace"):
        s.trace(units, tmp_path / "no" / "such" / "dir.json")
