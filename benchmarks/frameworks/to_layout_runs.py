#!/usr/bin/env python3
"""The harness's results (bench_frameworks.py's CSV) as placer's layout-runs
CSV (docs/frameworks.md), for `placer calibrate --layout-runs`.

Kept: runs that finished (status ok), eager (compile 0), bf16 autocast with
fp32 parameters (precision bf16-amp), of models placer's model text can
state exactly. Left out, and why, on stderr: torch.compile (another stack:
its own profile), pure-bf16 parameters (another memory convention), FP8,
Qwen3-32B (not converted so far), and forced load balancing
(debug.moe_force_load_balance: no layout key says it).

Dense models are named by placer's model text (MODELS). The MoE cuts are
described by model files this script writes (--models-dir, default
data/frameworks/runs/models/): the shipped config (data/models/NAME.json)
with the harness's cuts (layers, routed experts, top-k, DeepSeek's groups)
applied, so that placer builds exactly the model that ran; the run's
`model` cell is that file's path, relative to the repository root (run
placer from there).

The router's per-expert token counts do not fit the layout-runs CSV (its
parser refuses unknown columns): with --hist HIST.json (bench_frameworks.py
--hist-out) the script also writes --imbalance-out, one row per (run, MoE
layer): experts, choices a step, the counts' max / mean, the coefficient
of variation, the max / mean of the top-1% experts, and the counts
themselves, keyed by the same run id.

  python3 benchmarks/frameworks/to_layout_runs.py RESULTS.csv [--cluster h200x2] [--moe-only] \\
      [--models-dir data/frameworks/runs/models] [--hist HIST.json --imbalance-out IMB.csv] > runs.csv
"""
import argparse
import csv
import json
import math
import os
import sys

MODELS = {"llama3-8b-L8": "llama-3-8b,layers=8"}
FRAMEWORKS = {"torchtitan": "torchtitan", "hf": "hf"}

# The MoE cuts of bench_frameworks.py: the shipped config and the fields changed. DeepSeek-V3
# shapes ran without group-limited routing (n_group 1) except the -G8 cut.
MOE_MODELS = {
    "qwen3-30b-a3b-L4": ("qwen3-30b-a3b", dict(num_hidden_layers=4)),
    "qwen3-30b-a3b-L4-E32": ("qwen3-30b-a3b", dict(num_hidden_layers=4, num_experts=32)),
    "qwen3-30b-a3b-L4-K2": ("qwen3-30b-a3b", dict(num_hidden_layers=4, num_experts_per_tok=2)),
    "qwen3-235b-a22b-L4-E32": ("qwen3-235b-a22b", dict(num_hidden_layers=4, num_experts=32)),
    "dsv3-L3-E32": ("deepseek-v3", dict(num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=32,
                                        n_group=1, topk_group=1)),
    "dsv3-L2-E32": ("deepseek-v3", dict(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=32,
                                        n_group=1, topk_group=1)),
    "dsv3-L2-E32-G8": ("deepseek-v3", dict(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=32,
                                           n_group=8, topk_group=4)),
    "dsv3-L3-E16": ("deepseek-v3", dict(num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=16,
                                        n_group=1, topk_group=1)),
    # gpt-oss widths in the Qwen3 MoE block that ran (bench_frameworks.py says why)
    "gptoss20b-shape-L3": ("qwen3-30b-a3b", dict(num_hidden_layers=3, hidden_size=2880, intermediate_size=2880,
                                                 moe_intermediate_size=2880, num_attention_heads=64,
                                                 num_key_value_heads=8, head_dim=64, vocab_size=201088,
                                                 num_experts=32, num_experts_per_tok=4)),
    "gptoss120b-shape-L1": ("qwen3-30b-a3b", dict(num_hidden_layers=1, hidden_size=2880, intermediate_size=2880,
                                                  moe_intermediate_size=2880, num_attention_heads=64,
                                                  num_key_value_heads=8, head_dim=64, vocab_size=201088,
                                                  num_experts=128, num_experts_per_tok=4)),
}
# the harness's card -> placer's cluster with one such GPU
CLUSTERS = {"H200": "h200x2", "H100": "dgx-h100"}


def write_model_file(key, models_dir, root):
    base, cut = MOE_MODELS[key]
    with open(os.path.join(root, "data", "models", base + ".json")) as f:
        cfg = json.load(f)
    for k in list(cfg):
        if k.startswith("published"):
            del cfg[k]  # the shipped model's published totals: not this cut's
    cfg.update(cut)
    cfg["name"] = key
    cfg["source"] = (f"benchmarks/frameworks/to_layout_runs.py: data/models/{base}.json with "
                     + ", ".join(f"{k} {v}" for k, v in cut.items())
                     + ": the cut bench_frameworks.py trains as '" + key + "' in torchtitan 0.2.2")
    os.makedirs(os.path.join(root, models_dir), exist_ok=True)
    rel = os.path.join(models_dir, key + ".json")
    with open(os.path.join(root, rel), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    return rel


def imbalance_rows(hist):
    """Per (run, layer): the statistics of the router's counts."""
    out = []
    for rid, h in sorted(hist.items()):
        for li, counts in enumerate(h["layers"]):
            n = len(counts)
            mean = sum(counts) / n
            sd = math.sqrt(sum((c - mean) ** 2 for c in counts) / n)
            top = sorted(counts, reverse=True)[:max(1, n // 100)]
            out.append(dict(run=rid, layer=li, layer_name=h["names"][li], experts=n, topk=h.get("topk", ""),
                            choices_per_step=h.get("choices_per_step", ""), steps=h["steps"],
                            max_over_mean=f"{max(counts) / mean:.4f}" if mean else "",
                            min_over_mean=f"{min(counts) / mean:.4f}" if mean else "",
                            cv=f"{sd / mean:.4f}" if mean else "",
                            counts=" ".join(f"{c:g}" for c in counts)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--cluster", default="", help="placer cluster (default: from the gpu column)")
    ap.add_argument("--models-dir", default="data/frameworks/runs/models")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--hist", default="", help="bench_frameworks.py --hist-out file")
    ap.add_argument("--imbalance-out", default="")
    ap.add_argument("--moe-only", action="store_true", help="only the MoE runs")
    ap.add_argument("--framework", default="", help="only this framework's runs")
    a = ap.parse_args()
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["run", "model", "cluster", "gpus", "layout", "seq", "framework", "step_ms", "peak_bytes",
                  "reserved_bytes"])
    skipped = {}
    written = {}
    for r in csv.DictReader(open(a.results)):
        why = None
        if r["status"] != "ok":
            why = "status " + r["status"]
        elif r["compile"] != "0":
            why = "torch.compile"
        elif r["precision"] != "bf16-amp":
            why = "precision " + r["precision"]
        elif r["model"] not in MODELS and r["model"] not in MOE_MODELS:
            why = "model " + r["model"]
        elif r["framework"] not in FRAMEWORKS:
            why = "framework " + r["framework"]
        elif "moe_force_load_balance" in r.get("notes", ""):
            why = "forced load balance"
        elif a.moe_only and r["model"] not in MOE_MODELS:
            why = "dense (--moe-only)"
        elif a.framework and r["framework"] != a.framework:
            why = "framework " + r["framework"] + " (--framework)"
        if why:
            skipped.setdefault(why, []).append(r["run_id"])
            continue
        if r["model"] in MOE_MODELS:
            if r["model"] not in written:
                written[r["model"]] = write_model_file(r["model"], a.models_dir, a.root)
            model = written[r["model"]]
        else:
            model = MODELS[r["model"]]
        cluster = a.cluster or next((v for k, v in CLUSTERS.items() if k in r.get("gpu", "")), "h200x2")
        mb = int(r["micro_batch"])
        lay = f"mbs={mb},gbs={mb},recompute={r['recompute']},precision=bf16"
        out.writerow([r["run_id"], model, cluster, 1, lay, r["seq"], FRAMEWORKS[r["framework"]],
                      r["step_ms_median"], r["peak_alloc_bytes"], r["peak_reserved_bytes"]])
    for why, ids in sorted(skipped.items()):
        print(f"left out ({why}): {' '.join(ids)}", file=sys.stderr)
    if a.hist and a.imbalance_out:
        rows = imbalance_rows(json.load(open(a.hist)))
        with open(a.imbalance_out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["run"], lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        print(f"imbalance: {len(rows)} (run, layer) rows -> {a.imbalance_out}", file=sys.stderr)


if __name__ == "__main__":
    main()
