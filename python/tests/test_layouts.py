"""The parallel-layout simulator and planner from Python against
`placer layout --json` and `placer plan --json`."""

import json

import pytest

import placer
from conftest import run_placer

LAYOUTS = [
    ("gpt2,batch=16,seq=1024", "dgx-h100", "tp=2,pp=2,dp=2,mbs=2,gbs=16"),
    ("llama-3-8b", "dgx-h100", "tp=4,pp=2,vp=2,dp=2,mbs=1,gbs=32,recompute=selective,zero=1"),
    ("gpt12,batch=64", "dgx-a100-80gb", "tp=1,pp=4,dp=4,mbs=4,gbs=64"),
]


@pytest.mark.parametrize("model,cluster,layout", LAYOUTS)
def test_simulate_layout_equals_placer_layout(placer_bin, model, cluster, layout, tmp_path):
    r = placer.simulate_layout(model, cluster, layout, seq=2048 if "llama" in model else None,
                               trace=tmp_path / "py.json")
    args = ["layout", "--model", model, "--cluster", cluster, "--layout", layout, "--json",
            "--trace", tmp_path / "cli.json"]
    if "llama" in model:
        args += ["--seq", 2048]
    out = json.loads(run_placer(placer_bin, *args).stdout)
    assert r["layout"] == out["layout"]
    assert f"{r['step_us']:.3f}" == f"{out['step_us']:.3f}"
    assert f"{r['mfu']:.6f}" == f"{out['mfu']:.6f}"
    assert r["memory_bytes"] == out["memory"]["total"] and r["oom"] == out["memory"]["oom"]
    assert r["stage_memory_bytes"] == out["memory"]["per_stage"]
    for part, us in out["breakdown_us"].items():
        assert f"{r['breakdown_us'][part]:.3f}" == f"{us:.3f}"
    assert (tmp_path / "py.json").read_bytes() == (tmp_path / "cli.json").read_bytes()


def test_plan_equals_placer_plan(placer_bin):
    p = placer.plan("llama-3-8b", "dgx-h100", gpus=64, global_batch=512, seq=4096, top=4)
    out = json.loads(run_placer(placer_bin, "plan", "--model", "llama-3-8b", "--cluster", "dgx-h100", "--gpus", 64,
                                "--global-batch", 512, "--seq", 4096, "--top", 4, "--json").stdout)
    assert p["considered"] == out["search"]["considered"] and p["simulated"] == out["search"]["simulated"]
    assert len(p["top"]) == len(out["top"]) == 4
    for mine, theirs in zip(p["top"], out["top"]):
        fields = dict(kv.split("=") for kv in mine["layout"].split(","))
        lay = theirs["layout"]
        for key in ("tp", "cp", "pp", "vp", "dp"):
            assert int(fields[key]) == lay[key]
        assert fields["zero"] == lay["zero"] and int(fields["mbs"]) == lay["micro_batch"]
        assert f"{mine['step_us'] / 1000:.6f}" == f"{theirs['predicted']['step_ms']:.6f}"
        assert mine["memory_bytes"] == theirs["predicted"]["memory_bytes"]["total"]
    assert p["top"][0]["step_us"] <= p["top"][-1]["step_us"]


def test_layout_errors_carry_the_c_message():
    with pytest.raises(placer.InputError, match=r"layout: tp \(5\) must divide the attention heads \(12\)"):
        placer.simulate_layout("gpt2,batch=16", "dgx-h100", "tp=5")
    with pytest.raises(placer.InputError, match="layout: unknown layout key 'bogus'"):
        placer.simulate_layout("gpt2,batch=16", "dgx-h100", "bogus=1")
    with pytest.raises(placer.NotFoundError, match="cluster 'nowhere'"):
        placer.simulate_layout("gpt2", "nowhere", "tp=1")
    with pytest.raises(placer.NotFoundError, match="model 'nomodel'"):
        placer.plan("nomodel", "dgx-h100")
    with pytest.raises(placer.InputError, match="global_batch"):
        placer.plan("llama-3-8b", "dgx-h100")
    with pytest.raises(placer.InputError, match="framework"):
        placer.plan("gpt2", "dgx-h100", global_batch=64, framework="jax")
