"""The searches and the REINFORCE placer from Python."""

import numpy as np
import pytest

import placer


def test_searches_agree_with_the_simulator_and_the_optimum(data_copy):
    s = placer.Session(db=data_copy("h200x2.db"), micro_batches=4, schedule="1f1b", threads=2)
    best = {}
    for m in ("single", "human", "dp", "random", "anneal", "local", "etf", "exhaustive"):
        cands, info = s.search(m, budget=300, seed=4)
        assert cands, m
        for c in cands:
            res = s.simulate(c.nodes)
            assert res.cost_us[0] == c.cost_us and res.step_us[0] == c.step_us, (m, c.label)
            if c.units is not None:
                assert np.array_equal(s.to_nodes(c.units), c.nodes)
        best[m] = min(c.cost_us for c in cands)
        if m in ("random", "anneal", "local"):
            assert len(info["curve"]) == 300 and np.all(np.diff(info["curve"]) <= 0)
            assert info["curve"][-1] == best[m]
    # the exhaustive search over groups is the optimum of every group placer
    assert info["evaluated"] >= 2**12
    for m in ("random", "anneal", "local", "dp"):
        assert best["exhaustive"] <= best[m]
    # deterministic
    assert s.search("anneal", budget=300, seed=4)[0][0].cost_us == best["anneal"]


def test_train_records_a_run_whose_samples_read_back(data_copy):
    db = data_copy("h200x2.db", tag="pytrain-")
    s = placer.Session(db=db, micro_batches=2, schedule="gpipe", threads=2, write=True)
    out = s.train(updates=3, samples=4, seed=2)
    assert out["updates"] == 3 and len(out["progress"]) == 3
    assert out["shortlist"] and out["shortlist"][-1].label == "rl favourite"
    smp = placer.run_samples(db, out["run_id"])
    assert len(smp["step_us"]) == 12
    assert list(smp["update"]) == [0] * 4 + [1] * 4 + [2] * 4
    res = s.simulate(smp["placement"])
    assert np.array_equal(res.step_us, smp["step_us"]) and np.array_equal(res.oom, smp["oom"])
    assert out["best_cost_us"] == min(res.cost_us)
    run = [r for r in placer.runs(db) if r["id"] == out["run_id"]][0]
    assert run["finished"] and run["n_samples"] == 12 and run["method"] == "reinforce-python"
    # without a database to write, nothing is recorded
    assert placer.Session(spec="h200x2-nvlink").train(updates=1, samples=2)["run_id"] is None


def test_ppo_and_learned_grouping_train(data_copy):
    db = data_copy("h200x2.db")
    ppo = placer.Session(db=db, threads=2).train(updates=2, samples=4, algo="ppo", record=False)
    assert ppo["updates"] == 2 and ppo["run_id"] is None
    s = placer.Session(db=db, groups="learned", threads=2)
    out = s.train(updates=2, samples=4, grouper_groups=4, record=False)
    best = min(out["shortlist"], key=lambda c: c.cost_us)
    assert s.simulate(best.nodes).cost_us[0] == best.cost_us
    with pytest.raises(placer.InputError, match="ppo"):
        s.train(updates=1, algo="a2c")


def test_graph_info():
    g = placer.graph_info("default")
    assert g["n_nodes"] == 40 and g["params"] == 49343232
    assert placer.graph_info("gpt12")["config"]["layers"] == 12
    # shipped models (data/models) and config.json paths, as placer plan reads them
    llama = placer.graph_info("llama-3-8b,batch=8,seq=1024")
    assert llama["config"]["layers"] == 32 and llama["params"] > 8e9
    s = placer.Session(spec="h200x4-nvlink", config="gpt2,batch=16,seq=512", micro_batches=4, schedule="1f1b")
    assert s.n_nodes == 76 and s.search("dp")[0][0].cost_us < s.search("single")[0][0].cost_us
    with pytest.raises(placer.NotFoundError, match="shipped model"):
        placer.graph_info("no-such-model")
