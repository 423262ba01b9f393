#!/usr/bin/env python3
"""The harness's results (bench_frameworks.py's CSV) as placer's layout-runs
CSV (docs/frameworks.md), for `placer calibrate --layout-runs`.

Kept: runs that finished (status ok), eager (compile 0), bf16 autocast with
fp32 parameters (precision bf16-amp), of models placer's model text can
state exactly (MODELS below). Left out, and why, on stderr: torch.compile
(another stack: its own profile), pure-bf16 parameters (another memory
convention), FP8, the MoE shapes (the MoE model is not on this branch), and
Qwen3-32B (head_dim 128 x 64 heads != hidden 5120: placer's gpt_config has
no separate head_dim yet).

  python3 benchmarks/frameworks/to_layout_runs.py RESULTS.csv > runs.csv
"""
import csv
import sys

MODELS = {"llama3-8b-L8": "llama-3-8b,layers=8"}
FRAMEWORKS = {"torchtitan": "torchtitan", "hf": "hf"}


def main():
    src = sys.argv[1]
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["run", "model", "cluster", "gpus", "layout", "seq", "framework", "step_ms", "peak_bytes",
                  "reserved_bytes"])
    skipped = {}
    for r in csv.DictReader(open(src)):
        why = None
        if r["status"] != "ok":
            why = "status " + r["status"]
        elif r["compile"] != "0":
            why = "torch.compile"
        elif r["precision"] != "bf16-amp":
            why = "precision " + r["precision"]
        elif r["model"] not in MODELS:
            why = "model " + r["model"]
        elif r["framework"] not in FRAMEWORKS:
            why = "framework " + r["framework"]
        if why:
            skipped.setdefault(why, []).append(r["run_id"])
            continue
        mb = int(r["micro_batch"])
        lay = f"mbs={mb},gbs={mb},recompute={r['recompute']},precision=bf16"
        out.writerow([r["run_id"], MODELS[r["model"]], "h200x2", 1, lay, r["seq"], FRAMEWORKS[r["framework"]],
                      r["step_ms_median"], r["peak_alloc_bytes"], r["peak_reserved_bytes"]])
    for why, ids in sorted(skipped.items()):
        print(f"left out ({why}): {' '.join(ids)}", file=sys.stderr)


if __name__ == "__main__":
    main()
