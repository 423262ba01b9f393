#!/usr/bin/env python3
"""The Megatron export checked by Megatron-LM's own training-script parser: a
documented manual check (issue 37), since megatron/training/arguments.py is in
no package. For each plan of tests/plan/framework_plans.py it runs
`placer plan ... --framework megatron --export megatron --out DIR`, then
Megatron-LM's parse_args, validate_args and core_transformer_config_from_args
on DIR/args.txt (with DIR/env.sh's environment and the plan's world size), and
prints what Megatron-LM made of it beside what placer planned (plan.json);
"matches" when every compared value agrees.

Stubs, each where validate_args asks the GPU (there is none):
  STUB torch.cuda.get_device_capability -> (9, 0): asked for --moe-grouped-gemm
  STUB megatron.training.arguments.get_device_arch_version -> 9: asked for the
       CUDA_DEVICE_MAX_CONNECTIONS rule and the FSDP stream groups (Hopper)
  STUB megatron.training.arguments.is_te_min_version -> True: asked of
       Transformer Engine (a GPU library, not installed on the CPU) by the
       FP8 checks
  STUB megatron.core.models.common.embeddings.rope_utils.fused_apply_rotary_pos_emb
       -> a placeholder: TransformerConfig asks for Transformer Engine's fused
       RoPE kernel, which Megatron-LM turns on by default
Arguments added to every command line, as a launch script adds them (no data,
no tokenizer files are read): --mock-data --tokenizer-type NullTokenizer
--vocab-size V (the plan's vocabulary), --train-iters 1.

Environment: Python 3.12 (Megatron-LM at d98e8a6 imports typing.override),
torch 2.11.0 as tests/plan/framework-parsers.pins installs it, triton 3.6.0,
numpy, packaging, einops, pyyaml; the Megatron-LM tree at commit
d98e8a64ddf34856e74b24714e3bedb2f5a39553 (git clone
https://github.com/NVIDIA/Megatron-LM && git checkout d98e8a6).

usage: check-megatron-lm.py --megatron-lm DIR [--commit SHA] [--placer BIN] [--flags FILE] [--out FILE]
  --commit SHA   the tree's commit when DIR is no git checkout (a snapshot's files)
  --flags FILE   also write the parser's flags (tests/plan/megatron_lm_flags.txt)
  --out FILE     the report (tests/plan/megatron_lm_check.txt); default stdout
"""
import argparse
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "plan"))
from framework_plans import PLANS  # noqa: E402

COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
STUBS = ["torch.cuda.get_device_capability -> (9, 0)",
         "megatron.training.arguments.get_device_arch_version -> 9",
         "megatron.training.arguments.is_te_min_version -> True",
         "megatron.core.models.common.embeddings.rope_utils.fused_apply_rotary_pos_emb -> a placeholder"]


def install_stubs():
    import torch

    import megatron.training.arguments as A

    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    A.get_device_arch_version = lambda *a, **k: 9
    if hasattr(A, "is_te_min_version"):
        A.is_te_min_version = lambda *a, **k: True
    import megatron.core.models.common.embeddings.rope_utils as R

    def te_fused_rope_placeholder(*a, **k):  # never called: the check only asks whether it exists
        raise RuntimeError("Transformer Engine's fused RoPE (a stub on the CPU)")

    R.fused_apply_rotary_pos_emb = te_fused_rope_placeholder


def argv_of(path):
    with open(path) as f:
        text = f.read()
    return shlex.split(text.replace(" \\\n", " "))


def env_of(path):
    """env.sh's export / unset lines into os.environ."""
    with open(path) as f:
        for line in f:
            words = shlex.split(line, comments=True)
            if words[:1] == ["export"]:
                k, _, v = words[1].partition("=")
                os.environ[k] = v
            elif words[:1] == ["unset"]:
                os.environ.pop(words[1], None)


def chunks_of(args, config):
    """Decoder layers per pipeline chunk, as Megatron-LM splits them."""
    from megatron.core.transformer.enums import LayerType

    pp = args.pipeline_model_parallel_size
    lay = config.pipeline_model_parallel_layout
    if lay is not None:
        vp = lay.virtual_pipeline_model_parallel_size
        return [lay.layout[c % pp][c // pp].count(LayerType.decoder) for c in range(pp * vp)]
    L = args.num_layers
    first, last = args.decoder_first_pipeline_num_layers, args.decoder_last_pipeline_num_layers
    if first is not None or last is not None:
        first, last = first or 0, last or 0
        return [first] + [(L - first - last) // (pp - 2)] * (pp - 2) + [last] if pp > 2 else [first, last]
    vp = args.virtual_pipeline_model_parallel_size or 1
    return [L // (pp * vp)] * (pp * vp)


def check_one(name, margs, plan, env_path):
    """Megatron-LM's reading of one export: (report lines, mismatches)."""
    from megatron.training.argument_utils import core_transformer_config_from_args
    from megatron.training.arguments import parse_args, validate_args

    lay, m = plan["layout"], plan["model"]
    saved_env = dict(os.environ)
    env_of(env_path)
    os.environ["WORLD_SIZE"], os.environ["RANK"] = str(lay["world"]), "0"
    sys.argv = ["pretrain_gpt.py", *margs, "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size",
                str(m["vocab"]), "--train-iters", "1"]
    try:
        out = io.StringIO()
        stdout, sys.stdout = sys.stdout, out  # validate_args prints every argument
        try:
            args = parse_args()
            validate_args(args, {})
            config = core_transformer_config_from_args(args)
        finally:
            sys.stdout = stdout
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    got = {
        "layers": args.num_layers, "hidden": args.hidden_size, "ffn": args.ffn_hidden_size,
        "heads": args.num_attention_heads,
        "kv_heads": (config.num_query_groups or args.num_attention_heads) if not args.multi_latent_attention
        else args.num_attention_heads,
        "norm": args.normalization, "swiglu": bool(args.swiglu), "position": args.position_embedding_type,
        "rotary_base": args.rotary_base, "untied": bool(args.untie_embeddings_and_output_weights),
        "qk_layernorm": bool(args.qk_layernorm), "experts": args.num_experts or 0,
        "top_k": args.moe_router_topk if args.num_experts else 0,
        "tp": args.tensor_model_parallel_size, "pp": args.pipeline_model_parallel_size,
        "vp": args.virtual_pipeline_model_parallel_size or 1, "cp": args.context_parallel_size,
        "ep": args.expert_model_parallel_size, "etp": args.expert_tensor_parallel_size,
        "dp": args.data_parallel_size, "mbs": args.micro_batch_size, "gbs": args.global_batch_size,
        "recompute": args.recompute_granularity or "none",
        "fp8": str(getattr(args.fp8_recipe, "value", args.fp8_recipe)) if args.fp8 else None,
        "chunks": chunks_of(args, config),
    }
    want = {
        "layers": m["layers"], "hidden": m["d_model"], "ffn": m["d_ff"], "heads": m["heads"],
        "kv_heads": m["kv_heads"], "norm": {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[m["norm"]],
        "swiglu": m["mlp"] == "swiglu", "position": {"rotary": "rope", "learned": "learned_absolute"}[m["pos"]],
        "rotary_base": m["rope_theta"] if m["pos"] == "rotary" else got["rotary_base"], "untied": not m["tied"],
        "qk_layernorm": bool(m["qk_norm"]), "experts": m["experts"], "top_k": m["top_k"],
        "tp": lay["tp"], "pp": lay["pp"], "vp": lay["vp"], "cp": lay["cp"], "ep": lay["ep"], "etp": lay["etp"],
        "dp": lay["dp"], "mbs": lay["micro_batch"], "gbs": lay["global_batch"], "recompute": lay["recompute"],
        "fp8": lay.get("fp8"), "chunks": plan["chunk_layers"],
    }
    if not m["experts"]:  # the expert grid of a dense model is Megatron's default (etp = tp), unused
        want["ep"], want["etp"] = got["ep"], got["etp"]
    bad = [f"{k} {got[k]!r} (plan {want[k]!r})" for k in want if got[k] != want[k]]
    short = {k: v for k, v in got.items() if k != "chunks"}
    lines = [f"{name}: {type(config).__name__}, " + ", ".join(f"{k}={v}" for k, v in short.items()),
             f"  chunks {'/'.join(map(str, got['chunks']))}; "
             f"micro-batches {args.global_batch_size // (args.micro_batch_size * args.data_parallel_size)}"]
    return lines, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megatron-lm", required=True)
    ap.add_argument("--placer", default=os.path.join(ROOT, "build", "cli", "placer"))
    ap.add_argument("--commit")
    ap.add_argument("--flags")
    ap.add_argument("--out")
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.megatron_lm))
    commit = f"{a.commit} (files of a snapshot)" if a.commit else "(not a git checkout)"
    if os.path.isdir(os.path.join(a.megatron_lm, ".git")):
        commit = subprocess.run(["git", "-C", a.megatron_lm, "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        if commit != COMMIT:
            print(f"check-megatron-lm: the tree is at {commit}, the exports target {COMMIT}", file=sys.stderr)
    install_stubs()
    from megatron.training.arguments import add_megatron_arguments

    report = [f"Megatron-LM {COMMIT[:7]} (tree: {commit}) reading placer's Megatron exports",
              "stubs: " + "; ".join(STUBS), ""]
    if a.flags:
        parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
        flags = sorted(k for k in parser._option_string_actions if k.startswith("--"))
        with open(a.flags, "w") as f:
            f.write(f"# Megatron-LM {COMMIT[:7]}: the flags of megatron/training/arguments.py's parser "
                    "(scripts/check-megatron-lm.py --flags)\n" + "\n".join(flags) + "\n")
    failed = refused = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in PLANS:
            d = os.path.join(tmp, name)
            p = subprocess.run([a.placer, "plan", *shlex.split(args), "--framework", "megatron", "--export",
                                "megatron", "--out", d], capture_output=True, text=True)
            if p.returncode == 2:
                report.append(f"{name}: refused: {p.stderr.strip().removeprefix('placer plan: ')}")
                refused += 1
                continue
            if p.returncode != 0:
                report.append(f"{name}: placer failed: {p.stderr.strip()}")
                failed += 1
                continue
            with open(os.path.join(d, "plan.json")) as f:
                plan = json.load(f)
            try:
                lines, bad = check_one(name, argv_of(os.path.join(d, "args.txt")), plan, os.path.join(d, "env.sh"))
            except (SystemExit, Exception) as e:  # argparse exits on an unknown flag
                report.append(f"{name}: Megatron-LM refused the arguments: {type(e).__name__}: {e}")
                failed += 1
                continue
            report.extend(lines)
            report.append("  matches" if not bad else "  DIFFERS: " + "; ".join(bad))
            failed += bool(bad)
    report.append("")
    report.append(f"{len(PLANS)} plans: {len(PLANS) - refused - failed} match, {refused} refused by placer, "
                  f"{failed} not matching")
    text = "\n".join(report) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
