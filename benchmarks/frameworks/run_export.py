#!/usr/bin/env python3
"""run_export.py: a torchtitan export of `placer plan` (docs/exports.md) run
by torchtitan 0.2.2's own trainer for a few steps on one GPU, its median step
time printed beside placer's prediction for the same layout.

The export directory (placer plan ... --framework torchtitan --export
torchtitan --out DIR) is read as torchtitan reads it: ConfigManager on
DIR/job.toml, DIR on the import path for placer_model.py ([experimental]
custom_import). Changed only where a benchmark must: the dump folder, the
step count, the logging interval (off), and the data: the train spec of the
exported model name is replaced by a copy without tokenizer, data loader,
validator and state-dict adapter (as bench_frameworks.py does), and each
micro-batch is random tokens of the export's local batch and sequence. A
step is Trainer.train_step: the export's gradient accumulation (global /
(local x dp) micro-batches) or pipeline schedule, the optimizer step;
timed with CUDA events after the warm-up steps.

The prediction is DIR/plan.json's (placer plan --framework torchtitan
simulates with torchtitan's profile: the figure `placer layout --framework
torchtitan` gives for the layout, which run_export.sh prints when a placer
binary is there).

usage: run_export.py DIR [--steps N] [--warmup W] [--dry-run]
  --dry-run  on the CPU, the flavor shrunk to toy widths (dim 256, 4 heads,
             vocab 2048; the layer count kept) and the sequence to 256: the
             TOML, the flavor module, the trainer's construction, the
             gradient accumulation and the timed loop, no GPU
"""
import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def toy_args(args):
    """The flavor's model args at toy widths (the dry run)."""
    kw = {"dim": 256, "n_heads": 4, "vocab_size": 2048}
    if hasattr(args, "n_kv_heads"):
        kw["n_kv_heads"] = 2
    if hasattr(args, "multiple_of"):
        kw["multiple_of"], kw["ffn_dim_multiplier"] = 64, None
    if hasattr(args, "hidden_dim"):
        kw["hidden_dim"] = 512
    if hasattr(args, "head_dim"):
        kw["head_dim"] = 64
    return dataclasses.replace(args, **{k: v for k, v in kw.items() if hasattr(args, k)})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    d = os.path.abspath(a.dir)
    with open(os.path.join(d, "plan.json")) as f:
        plan = json.load(f)
    lay = plan["layout"]
    if lay["world"] != 1:
        sys.exit(f"run_export: the plan needs {lay['world']} GPUs; this runs one (plan with --gpus 1)")
    # the worker environment (one rank) and, for the dry run, torchtitan on the CPU
    sys.path.insert(0, HERE)
    import bench_frameworks as bf  # noqa: E402

    bf.setup_worker_env(types.SimpleNamespace(dry_run=a.dry_run))
    import torch
    import torchtitan.protocols.train_spec as ts
    from torchtitan.config import ConfigManager
    from torchtitan.train import Trainer

    sys.path.insert(0, d)  # placer_model.py, as [experimental] custom_import needs it
    dump = os.path.join("/tmp", f"run_export_{os.getpid()}")
    job = ConfigManager().parse_args(["--job.config_file", os.path.join(d, "job.toml"), "--job.dump_folder", dump,
                                      "--training.steps", "100000", "--metrics.log_freq", "1000000000"])
    if job.experimental.custom_import:
        __import__(job.experimental.custom_import)
    base = ts.get_train_spec(job.model.name)
    model_args = dict(base.model_args)
    if a.dry_run:
        model_args[job.model.flavor] = toy_args(model_args[job.model.flavor])
        job.optimizer.implementation = "foreach"
        job.training.seq_len = 256
    ts._extra_train_specs[job.model.name] = dataclasses.replace(
        base, model_args=model_args, build_dataloader_fn=None, build_tokenizer_fn=None, build_validator_fn=None,
        state_dict_adapter=None)
    margs = model_args[job.model.flavor]
    vocab = margs.vocab_size
    print(f"run_export: {job.model.name} {job.model.flavor} ({margs.n_layers} layers, dim {margs.dim}), "
          f"{plan['layout']['text']}; local batch {job.training.local_batch_size} x {job.training.seq_len}, "
          f"global {job.training.global_batch_size}{' (dry run on the CPU)' if a.dry_run else ''}", flush=True)
    trainer = Trainer(job)
    mb, seq = job.training.local_batch_size, job.training.seq_len
    gen = torch.Generator().manual_seed(0)
    data = [torch.randint(0, vocab, (mb, seq + 1), generator=gen) for _ in range(2)]

    def batches():
        i = 0
        while True:
            x = data[i % 2]
            i += 1
            yield {"input": x[:, :-1].contiguous()}, x[:, 1:].contiguous()

    it = batches()
    cuda = not a.dry_run

    def step():
        trainer.step = 2  # never a logging step
        trainer.train_step(it)

    warm, timed = (1, 2) if a.dry_run else (a.warmup, a.steps)
    for _ in range(warm):
        step()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            step()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
        else:
            t = time.perf_counter()
            step()
            times.append((time.perf_counter() - t) * 1e3)
    med = statistics.median(times)
    peak = torch.cuda.max_memory_allocated() / 1e9 if cuda else 0.0
    pred = plan.get("predicted", {}).get("step_ms")
    print(f"run_export: {timed} steps after {warm} warm-up: median {med:.2f} ms (min {min(times):.2f}, "
          f"max {max(times):.2f}){f', peak {peak:.2f} GB' if cuda else ''}")
    if pred:
        print(f"run_export: placer predicts {pred:.2f} ms (plan.json, torchtitan's profile): measured / predicted = "
              f"{med / pred:.3f}{' (a dry run: toy widths on the CPU, no comparison)' if a.dry_run else ''}")
    try:
        trainer.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


if __name__ == "__main__":
    main()
