#!/usr/bin/env python3
"""Real training steps with frameworks we did not write, on one GPU.

A matrix of runs (framework x model x micro-batch x sequence x recompute x
compile x precision), each a real training step (forward, loss, backward,
gradient clipping, fused AdamW step) on random tokens, timed with CUDA
events, written as one CSV row per run. Frameworks:

  hf          Hugging Face transformers (5.x) models built from a config
              with random weights (no download): fp32 parameters, bf16
              autocast, SDPA attention, MoE experts through the library's
              default (grouped_mm), torch.optim.AdamW(fused=True),
              clip_grad_norm_(1.0). Recompute: gradient_checkpointing_enable
              (non-reentrant, every decoder layer). Compile: torch.compile of
              each decoder layer (as torchtitan does).
  torchtitan  torchtitan 0.2.2's own Trainer (model, parallelize function,
              optimizer, loss, train_step) on one rank: fp32 parameters and
              bf16 autocast (what torchtitan does without FSDP), its
              activation checkpointing (mode full) and per-block compile,
              FP8 through its quantize.linear.float8 converter (torchao,
              tensorwise dynamic scaling, the output head left in bf16).
              Its tokenizer and data loader are replaced by random tokens,
              which needs no network.

Robustness: the parent process runs a worker process per framework that
takes the runs one at a time and writes one JSON line when it starts a run
and one with the result. A run that passes its timeout gets the worker
killed (its whole process group) and a TIMEOUT row; a worker that dies
gives the run in flight an ERROR row; after an out-of-memory error the
worker writes an OOM row (with the peak reached) and exits, and a fresh
worker takes the remaining runs. A global budget ends the matrix in time:
runs not started are SKIPPED rows. Every run of the matrix gets a row.

  python3 bench_frameworks.py --out results.csv --log run.log [--budget-s 420]
  python3 bench_frameworks.py --dry-run --out /tmp/dry.csv   # tiny models on the CPU
"""

import argparse
import csv
import dataclasses
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback

# ----------------------------------------------------------------------------
# CSV
# ----------------------------------------------------------------------------

CSV_COLUMNS = [
    "run_id", "framework", "model", "layers", "hidden", "ffn", "heads", "kv_heads", "vocab",
    "experts", "topk", "moe_ffn", "micro_batch", "seq", "recompute", "precision", "compile",
    "status", "step_ms_median", "step_ms_min", "step_ms_max", "warmup_steps", "timed_steps",
    "peak_alloc_bytes", "peak_reserved_bytes", "tokens_per_s", "n_params", "n_active_params",
    "model_tflop_per_step", "model_tflops_per_s", "setup_s", "wall_s", "framework_version",
    "torch_version", "gpu", "notes",
]

# ----------------------------------------------------------------------------
# Models: real shapes, cut in depth (and for DeepSeek-V3 in experts) to fit
# one H200 with fp32 parameters + AdamW (16 bytes a parameter).
# ----------------------------------------------------------------------------

MODELS = {
    # Llama 3 8B (data/models/llama-3-8b.json), 8 of 32 layers
    "llama3-8b-L8": dict(family="llama", layers=8, hidden=4096, ffn=14336, heads=32, kv_heads=8,
                         head_dim=128, vocab=128256, experts=0, topk=0, moe_ffn=0),
    # Qwen3 32B, 4 of 64 layers
    "qwen3-32b-L4": dict(family="qwen3", layers=4, hidden=5120, ffn=25600, heads=64, kv_heads=8,
                         head_dim=128, vocab=151936, experts=0, topk=0, moe_ffn=0),
    # Qwen3 30B-A3B, 4 of 48 layers, all 128 experts (top-8)
    "qwen3-30b-a3b-L4": dict(family="qwen3_moe", layers=4, hidden=2048, ffn=6144, heads=32,
                             kv_heads=4, head_dim=128, vocab=151936, experts=128, topk=8,
                             moe_ffn=768),
    # DeepSeek-V3 shapes (MLA, 1 dense + 2 MoE layers, 1 shared expert) with
    # 32 of 256 routed experts (top-8): 256 do not fit one GPU in training
    "dsv3-L3-E32": dict(family="deepseek_v3", layers=3, dense_layers=1, hidden=7168, ffn=18432,
                        heads=128, kv_heads=128, head_dim=192, vocab=129280, experts=32, topk=8,
                        moe_ffn=2048, shared=1, q_lora=1536, kv_lora=512, nope=128, rope=64,
                        v_dim=128),
    # Mixtral 8x7B, 2 of 32 layers (HF only: torchtitan 0.2.2 has no Mixtral)
    "mixtral-8x7b-L2": dict(family="mixtral", layers=2, hidden=4096, ffn=14336, heads=32,
                            kv_heads=8, head_dim=128, vocab=32000, experts=8, topk=2,
                            moe_ffn=14336),
    # ---- the MoE matrix (--matrix moe): cuts that fit one 80 GB H100 with fp32
    # parameters + AdamW, varying experts, top-k and the expert shape
    # Qwen3-30B-A3B with 32 of its 128 experts (top-8): 4x the tokens per expert
    "qwen3-30b-a3b-L4-E32": dict(family="qwen3_moe", layers=4, hidden=2048, ffn=6144, heads=32,
                                 kv_heads=4, head_dim=128, vocab=151936, experts=32, topk=8,
                                 moe_ffn=768),
    # Qwen3-30B-A3B routed top-2 instead of top-8 (128 experts)
    "qwen3-30b-a3b-L4-K2": dict(family="qwen3_moe", layers=4, hidden=2048, ffn=6144, heads=32,
                                kv_heads=4, head_dim=128, vocab=151936, experts=128, topk=2,
                                moe_ffn=768),
    # Qwen3-235B-A22B shapes (hidden 4096, expert ffn 1536, 64 / 4 heads), 4 of 94 layers,
    # 32 of 128 experts (top-8)
    "qwen3-235b-a22b-L4-E32": dict(family="qwen3_moe", layers=4, hidden=4096, ffn=12288, heads=64,
                                   kv_heads=4, head_dim=128, vocab=151936, experts=32, topk=8,
                                   moe_ffn=1536),
    # DeepSeek-V3 shapes: 1 dense + 1 MoE layer, 32 routed experts (top-8), 1 shared
    "dsv3-L2-E32": dict(family="deepseek_v3", layers=2, dense_layers=1, hidden=7168, ffn=18432,
                        heads=128, kv_heads=128, head_dim=192, vocab=129280, experts=32, topk=8,
                        moe_ffn=2048, shared=1, q_lora=1536, kv_lora=512, nope=128, rope=64,
                        v_dim=128),
    # the same with DeepSeek's group-limited routing: 8 groups (of 4), the best 4 groups kept
    "dsv3-L2-E32-G8": dict(family="deepseek_v3", layers=2, dense_layers=1, hidden=7168, ffn=18432,
                           heads=128, kv_heads=128, head_dim=192, vocab=129280, experts=32, topk=8,
                           moe_ffn=2048, shared=1, q_lora=1536, kv_lora=512, nope=128, rope=64,
                           v_dim=128, groups=8, topk_groups=4),
    # 1 dense + 2 MoE layers with 16 routed experts (top-8): 2x the tokens per expert of E32
    "dsv3-L3-E16": dict(family="deepseek_v3", layers=3, dense_layers=1, hidden=7168, ffn=18432,
                        heads=128, kv_heads=128, head_dim=192, vocab=129280, experts=16, topk=8,
                        moe_ffn=2048, shared=1, q_lora=1536, kv_lora=512, nope=128, rope=64,
                        v_dim=128),
    # gpt-oss's MoE widths (hidden 2880, expert ffn 2880, 64 heads of 64, 8 kv heads, vocab
    # 201088) in torchtitan's Qwen3 MoE block (SDPA causal attention, q/k norms; no attention
    # sinks, biases, sliding window or clamped SwiGLU: torchtitan's own gpt_oss model needs
    # FlexAttention, compiled with max-autotune, and its attention is not what is measured
    # here): gpt-oss-20b's 32 experts (top-4), 3 of 24 layers
    "gptoss20b-shape-L3": dict(family="qwen3_moe", layers=3, hidden=2880, ffn=2880, heads=64,
                               kv_heads=8, head_dim=64, vocab=201088, experts=32, topk=4,
                               moe_ffn=2880),
    # gpt-oss-120b's 128 experts (top-4), 1 of 36 layers
    "gptoss120b-shape-L1": dict(family="qwen3_moe", layers=1, hidden=2880, ffn=2880, heads=64,
                                kv_heads=8, head_dim=64, vocab=201088, experts=128, topk=4,
                                moe_ffn=2880),
}


def tiny_dims(d):
    """The same family at toy size, for the CPU dry run."""
    t = dict(d)
    t.update(layers=2, hidden=64, ffn=128, heads=4, kv_heads=2, head_dim=16, vocab=256)
    if d["experts"]:
        t.update(experts=4, topk=2, moe_ffn=32)
    if d["family"] == "deepseek_v3":
        t.update(kv_heads=4, dense_layers=1, q_lora=32, kv_lora=16, nope=16, rope=8, v_dim=16,
                 head_dim=24)
    if d.get("groups"):
        t.update(experts=8, groups=4, topk_groups=2)
    return t


# ----------------------------------------------------------------------------
# The matrix, in priority order (the budget cuts from the end of each
# framework's list). timeout_s is per run (model build + compile + steps).
# ----------------------------------------------------------------------------

# precision in the matrix -> the CSV's label
PRECISIONS = {
    "bf16": "bf16-amp",            # fp32 parameters, grads and AdamW states; bf16 autocast
    "bf16-full": "bf16-full",      # parameters, grads and AdamW states all bf16 (no fp32 copy)
    "fp8": "fp8-tensorwise",       # bf16-amp + FP8 linears, dynamic tensorwise scales (torchao)
    "fp8-rowwise": "fp8-rowwise",  # bf16-amp + FP8 linears, rowwise scales (torchao recipe)
    "fp8-moe": "fp8-tensorwise+moe-rowwise",  # fp8 linears and FP8 grouped GEMMs in the experts
}


def R(fw, model, mb, seq, rec="none", comp=0, prec="bf16", balance=0):
    r = dict(framework=fw, model=model, micro_batch=mb, seq=seq, recompute=rec, compile=comp,
             precision=prec)
    if balance:
        r["balance"] = 1  # torchtitan's debug.moe_force_load_balance: every expert equal tokens
    return r


def default_matrix():
    tt = [
        R("torchtitan", "llama3-8b-L8", 1, 4096),
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096),
        R("torchtitan", "qwen3-32b-L4", 1, 4096),
        R("torchtitan", "dsv3-L3-E32", 1, 4096),
        R("torchtitan", "llama3-8b-L8", 1, 4096, "full"),
        R("torchtitan", "llama3-8b-L8", 1, 4096, "none", 1),
        R("torchtitan", "llama3-8b-L8", 2, 4096),
        R("torchtitan", "llama3-8b-L8", 1, 8192),
        R("torchtitan", "llama3-8b-L8", 4, 2048),
        R("torchtitan", "llama3-8b-L8", 1, 4096, "none", 1, "fp8"),
        R("torchtitan", "qwen3-30b-a3b-L4", 2, 4096),
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, "full"),
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 8192),
        R("torchtitan", "dsv3-L3-E32", 1, 4096, "full"),
        R("torchtitan", "qwen3-32b-L4", 1, 8192),
        R("torchtitan", "qwen3-32b-L4", 2, 4096, "full"),
        R("torchtitan", "llama3-8b-L8", 2, 8192, "full"),
        R("torchtitan", "llama3-8b-L8", 8, 8192),          # expected OOM: data too
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, "none", 1),
        R("torchtitan", "qwen3-32b-L4", 1, 4096, "none", 1),
        R("torchtitan", "llama3-8b-L8", 1, 4096, "full", 1),
        R("torchtitan", "dsv3-L3-E32", 2, 4096, "full"),
        R("torchtitan", "dsv3-L3-E32", 1, 4096, "none", 1),
        R("torchtitan", "llama3-8b-L8", 2, 4096, "none", 1, "fp8"),
    ]
    hf = [
        R("hf", "llama3-8b-L8", 1, 4096),
        R("hf", "qwen3-30b-a3b-L4", 1, 4096),
        R("hf", "mixtral-8x7b-L2", 1, 4096),
        R("hf", "qwen3-32b-L4", 1, 4096),
        R("hf", "llama3-8b-L8", 1, 4096, "full"),
        R("hf", "llama3-8b-L8", 1, 4096, "none", 1),
        R("hf", "llama3-8b-L8", 2, 4096),
        R("hf", "llama3-8b-L8", 1, 8192),
        R("hf", "llama3-8b-L8", 4, 2048),
        R("hf", "qwen3-30b-a3b-L4", 1, 4096, "full"),
        R("hf", "qwen3-30b-a3b-L4", 2, 4096),
        R("hf", "mixtral-8x7b-L2", 1, 4096, "full"),
        R("hf", "mixtral-8x7b-L2", 2, 4096),
        R("hf", "dsv3-L3-E32", 1, 4096),
        R("hf", "qwen3-32b-L4", 1, 8192, "full"),
        R("hf", "llama3-8b-L8", 8, 8192),                  # expected OOM
        R("hf", "qwen3-30b-a3b-L4", 1, 4096, "none", 1),
        R("hf", "llama3-8b-L8", 1, 4096, "none", 1, "fp8"),
        R("hf", "qwen3-32b-L4", 1, 4096, "none", 1),
    ]
    return tt, hf


def extra_matrix():
    """The second device call's runs: full-bf16 training (which puts HF's MoE experts on
    the bf16 grouped GEMM, see the README), FP8 variants, more tokens per expert."""
    tt = [
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, prec="bf16-full"),
        R("torchtitan", "llama3-8b-L8", 1, 4096, prec="bf16-full"),
        R("torchtitan", "dsv3-L3-E32", 1, 4096, prec="bf16-full"),
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, balance=1),
        R("torchtitan", "qwen3-30b-a3b-L4", 4, 4096),
        R("torchtitan", "llama3-8b-L8", 1, 2048),
        R("torchtitan", "dsv3-L3-E32", 1, 8192, "full"),
        R("torchtitan", "llama3-8b-L8", 1, 4096, "none", 1, "fp8-rowwise"),
        R("torchtitan", "qwen3-32b-L4", 1, 4096, "none", 1, "fp8"),
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, "none", 1, "fp8"),
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, "none", 1, "fp8-moe"),
        R("torchtitan", "qwen3-30b-a3b-L4", 2, 4096, "none", 1),
        R("torchtitan", "llama3-8b-L8", 1, 8192, "none", 1),
        R("torchtitan", "llama3-8b-L8", 4, 8192, "none"),
    ]
    hf = [
        R("hf", "qwen3-30b-a3b-L4", 1, 4096, prec="bf16-full"),
        R("hf", "mixtral-8x7b-L2", 1, 4096, prec="bf16-full"),
        R("hf", "dsv3-L3-E32", 1, 4096, prec="bf16-full"),
        R("hf", "llama3-8b-L8", 1, 4096, prec="bf16-full"),
        R("hf", "qwen3-30b-a3b-L4", 2, 4096, prec="bf16-full"),
        R("hf", "mixtral-8x7b-L2", 2, 4096, prec="bf16-full"),
        R("hf", "qwen3-30b-a3b-L4", 1, 4096, "none", 1, "bf16-full"),
        R("hf", "llama3-8b-L8", 1, 2048),
        R("hf", "llama3-8b-L8", 1, 8192, "none", 1),
    ]
    return tt, hf


def moe_matrix():
    """Issue 33's MoE runs (torchtitan only, bf16 autocast, eager), on one 80 GB H100: the
    earlier file's 9 torchtitan MoE configurations (tt01 tt10 tt11 tt12 = tm00-tm03, tx03 =
    tm18, tx04 tt03 tt13 tt21 tx06 = tm19-tm23, the last five beyond 80 GB: OOM rows there,
    data too) and cuts that vary experts, top-k and the expert shape. The first seven are the
    first device call's; each run records the router's per-expert token counts."""
    tt = [
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096),             # tm00 = tt01
        R("torchtitan", "qwen3-30b-a3b-L4", 2, 4096),             # tm01 = tt10
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, "full"),     # tm02 = tt11
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 8192),             # tm03 = tt12
        R("torchtitan", "dsv3-L2-E32", 1, 4096),                  # tm04
        R("torchtitan", "gptoss20b-shape-L3", 1, 4096),                # tm05
        R("torchtitan", "qwen3-235b-a22b-L4-E32", 1, 4096),       # tm06
        R("torchtitan", "qwen3-30b-a3b-L4-E32", 1, 4096),         # tm07
        R("torchtitan", "qwen3-30b-a3b-L4-K2", 1, 4096),          # tm08
        R("torchtitan", "qwen3-30b-a3b-L4", 4, 4096, "full"),     # tm09
        R("torchtitan", "dsv3-L2-E32", 2, 4096),                  # tm10
        R("torchtitan", "dsv3-L2-E32", 2, 4096, "full"),          # tm11
        R("torchtitan", "dsv3-L2-E32-G8", 1, 4096),               # tm12
        R("torchtitan", "dsv3-L3-E16", 1, 4096),                  # tm13
        R("torchtitan", "gptoss20b-shape-L3", 2, 4096),                # tm14
        R("torchtitan", "gptoss20b-shape-L3", 1, 4096, "full"),        # tm15
        R("torchtitan", "gptoss120b-shape-L1", 1, 4096),               # tm16
        R("torchtitan", "qwen3-235b-a22b-L4-E32", 2, 4096, "full"),  # tm17
        R("torchtitan", "qwen3-30b-a3b-L4", 1, 4096, balance=1),  # tm18 = tx03
        R("torchtitan", "qwen3-30b-a3b-L4", 4, 4096),             # tm19 = tx04
        R("torchtitan", "dsv3-L3-E32", 1, 4096),                  # tm20 = tt03
        R("torchtitan", "dsv3-L3-E32", 1, 4096, "full"),          # tm21 = tt13
        R("torchtitan", "dsv3-L3-E32", 2, 4096, "full"),          # tm22 = tt21
        R("torchtitan", "dsv3-L3-E32", 1, 8192, "full"),          # tm23 = tx06
    ]
    return tt, []


def assign_ids_and_timeouts(runs, prefix):
    for i, r in enumerate(runs):
        r["run_id"] = f"{prefix}{i:02d}"
        base = 75
        if r["compile"]:
            base = 200
        if MODELS[r["model"]]["experts"]:
            base += 30
        r.setdefault("timeout_s", base)
    return runs


# ----------------------------------------------------------------------------
# Worker side
# ----------------------------------------------------------------------------

def _emit(fh, obj):
    fh.write(json.dumps(obj) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def active_params(model, dims):
    """Parameters one token touches: routed expert weights scaled by topk/experts."""
    total = 0
    routed = 0
    embed = 0
    for name, p in model.named_parameters():
        n = p.numel()
        total += n
        if "embed_tokens" in name or "tok_embeddings" in name:
            embed += n
        elif ("experts" in name) and ("shared" not in name):
            routed += n
    frac = dims["topk"] / dims["experts"] if dims["experts"] else 1.0
    active = total - routed + routed * frac
    return total, int(active), embed


def model_flops_per_step(dims, active_nonembed, mb, seq):
    """6 N (active, non-embedding, head included) per token plus causal
    attention 6 * layers * seq/2 * heads * (d_qk + d_v) / 2 * 2 per token."""
    tokens = mb * seq
    if dims["family"] == "deepseek_v3":
        dqk, dv = dims["nope"] + dims["rope"], dims["v_dim"]
    else:
        dqk = dv = dims["head_dim"]
    attn_fwd_per_token = 2 * dims["layers"] * dims["heads"] * (dqk + dv) * seq / 2.0
    return tokens * (6.0 * active_nonembed + 3.0 * attn_fwd_per_token)


def hf_config(dims, seq):
    import transformers as T
    common = dict(vocab_size=dims["vocab"], hidden_size=dims["hidden"],
                  num_hidden_layers=dims["layers"], num_attention_heads=dims["heads"],
                  num_key_value_heads=dims["kv_heads"], max_position_embeddings=max(seq, 4096),
                  tie_word_embeddings=False, use_cache=False)
    fam = dims["family"]
    if fam == "llama":
        return T.LlamaConfig(intermediate_size=dims["ffn"], **common)
    if fam == "qwen3":
        return T.Qwen3Config(intermediate_size=dims["ffn"], head_dim=dims["head_dim"], **common)
    if fam == "qwen3_moe":
        return T.Qwen3MoeConfig(intermediate_size=dims["ffn"], moe_intermediate_size=dims["moe_ffn"],
                                num_experts=dims["experts"], num_experts_per_tok=dims["topk"],
                                head_dim=dims["head_dim"], decoder_sparse_step=1, mlp_only_layers=[],
                                norm_topk_prob=True, output_router_logits=False, **common)
    if fam == "mixtral":
        return T.MixtralConfig(intermediate_size=dims["moe_ffn"], num_local_experts=dims["experts"],
                               num_experts_per_tok=dims["topk"], output_router_logits=False, **common)
    if fam == "deepseek_v3":
        return T.DeepseekV3Config(intermediate_size=dims["ffn"], moe_intermediate_size=dims["moe_ffn"],
                                  n_routed_experts=dims["experts"], n_shared_experts=dims["shared"],
                                  num_experts_per_tok=dims["topk"],
                                  first_k_dense_replace=dims["dense_layers"],
                                  q_lora_rank=dims["q_lora"], kv_lora_rank=dims["kv_lora"],
                                  qk_nope_head_dim=dims["nope"], qk_rope_head_dim=dims["rope"],
                                  v_head_dim=dims["v_dim"], n_group=1, topk_group=1, **common)
    raise ValueError(f"no HF config for family {fam}")


def hf_session(spec, dims, device, notes):
    import torch
    import transformers as T
    cfg = hf_config(dims, spec["seq"])
    pdtype = torch.bfloat16 if spec["precision"] == "bf16-full" else torch.float32
    with torch.device(device):
        model = T.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=pdtype)
    model.train()
    impl = getattr(model.config, "_experts_implementation", None)
    if dims["experts"]:
        notes.append(f"experts_implementation={impl}")
    if spec["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if spec["precision"] in ("fp8-rowwise", "fp8-moe"):
        raise ValueError(f"precision {spec['precision']} is torchtitan-only here")
    if spec["precision"] == "fp8":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        # the emulated path is for the CPU dry run only (no FP8 matrix units there)
        cfg8 = Float8LinearConfig(emulate=(device == "cpu"))
        convert_to_float8_training(model, config=cfg8,
                                   module_filter_fn=lambda m, fqn: "lm_head" not in fqn)
        notes.append("fp8=torchao convert_to_float8_training tensorwise, lm_head bf16")
    if spec["compile"]:
        layers = model.model.layers
        for layer in layers:
            layer.compile()
        notes.append("compile=per decoder layer")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            fused=(device != "cpu"))
    gen = torch.Generator().manual_seed(0)
    mb, seq = spec["micro_batch"], spec["seq"]
    batches = [torch.randint(0, dims["vocab"], (mb, seq), generator=gen).to(device)
               for _ in range(2)]
    state = {"i": 0}
    amp_dtype = torch.bfloat16

    def step():
        x = batches[state["i"] % 2]
        state["i"] += 1
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda" if device != "cpu" else "cpu", dtype=amp_dtype):
            out = model(input_ids=x, labels=x, use_cache=False)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        return out.loss

    def cleanup():
        nonlocal model, opt
        del model, opt
        batches.clear()

    return step, (lambda: model), cleanup, None


def _tt_model_args(dims, seq):
    fam = dims["family"]
    if fam == "llama":
        from torchtitan.models.llama3.model.args import TransformerModelArgs
        # torchtitan sizes the FFN as multiple_of * ceil(mult * 8 dim / 3 / multiple_of);
        # the 8B flavour's 1.3 and 1024 give 14336 for dim 4096
        a = TransformerModelArgs(dim=dims["hidden"], n_layers=dims["layers"], n_heads=dims["heads"],
                                 n_kv_heads=dims["kv_heads"], vocab_size=dims["vocab"],
                                 ffn_dim_multiplier=1.3, multiple_of=1024, rope_theta=500000)
        if dims["hidden"] < 1024:  # dry run
            a.multiple_of = 32
        return a
    from torchtitan.models.moe import MoEArgs
    if fam in ("qwen3", "qwen3_moe"):
        from torchtitan.models.qwen3.model.args import Qwen3ModelArgs
        kw = dict(vocab_size=dims["vocab"], max_seq_len=seq, head_dim=dims["head_dim"],
                  dim=dims["hidden"], n_layers=dims["layers"], n_heads=dims["heads"],
                  n_kv_heads=dims["kv_heads"], qk_norm=True, hidden_dim=dims["ffn"],
                  rope_theta=1000000, enable_weight_tying=False)
        if fam == "qwen3_moe":
            kw.update(moe_enabled=True, moe_inter_dim=dims["moe_ffn"],
                      moe_args=MoEArgs(num_experts=dims["experts"], num_shared_experts=0,
                                       top_k=dims["topk"], score_func="softmax", route_norm=True,
                                       route_scale=1.0, score_before_experts=False))
        return Qwen3ModelArgs(**kw)
    if fam == "deepseek_v3":
        from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
        return DeepSeekV3ModelArgs(
            vocab_size=dims["vocab"], dim=dims["hidden"], inter_dim=dims["ffn"],
            moe_inter_dim=dims["moe_ffn"], n_layers=dims["layers"],
            n_dense_layers=dims["dense_layers"], n_heads=dims["heads"],
            moe_args=MoEArgs(num_experts=dims["experts"], num_shared_experts=dims["shared"],
                             top_k=dims["topk"], score_func="sigmoid", route_norm=True,
                             route_scale=2.5, score_before_experts=False,
                             num_expert_groups=dims.get("groups"),
                             num_limited_groups=dims.get("topk_groups")),
            q_lora_rank=dims["q_lora"], kv_lora_rank=dims["kv_lora"],
            qk_nope_head_dim=dims["nope"], qk_rope_head_dim=dims["rope"],
            v_head_dim=dims["v_dim"], attn_type="sdpa", attn_mask_type="causal",
            max_seq_len=max(seq, 4096))
    raise ValueError(f"torchtitan 0.2.2 has no model family {fam} here")


class RouterHist:
    """The router's per-expert token counts (TokenChoiceTopKRouter's third output, what
    torchtitan's load balancing reads), summed per MoE layer while `on` is set: the timed
    steps. Under full recompute the router runs twice a step (forward and recompute, the same
    choices), so the sums are divided by the calls per step."""

    def __init__(self, model):
        from torchtitan.models.moe.moe import TokenChoiceTopKRouter
        self.on = False
        self.names, self.sums, self.calls, self.handles = [], [], [], []
        for name, mod in model.named_modules():
            if isinstance(mod, TokenChoiceTopKRouter):
                self.names.append(name)
                self.sums.append(None)
                self.calls.append(0)
                self.handles.append(mod.register_forward_hook(self._hook(len(self.sums) - 1)))

    def _hook(self, i):
        def hook(mod, inp, out):
            if not self.on:
                return
            import torch
            c = out[2].detach().to(torch.float64)
            self.sums[i] = c if self.sums[i] is None else self.sums[i] + c
            self.calls[i] += 1
        return hook

    def result(self, steps):
        """{layers: per MoE layer the counts summed over `steps` forwards, names, steps,
        calls_per_step, max_over_mean per layer} or None when no router ran."""
        if not self.names or not all(self.calls):
            return None
        layers, mom = [], []
        for s, c in zip(self.sums, self.calls):
            v = [float(x) * steps / c for x in s.cpu().tolist()]
            layers.append([round(x, 3) for x in v])
            mean = sum(v) / len(v)
            mom.append(round(max(v) / mean, 4) if mean > 0 else 0.0)
        return {"layers": layers, "names": self.names, "steps": steps,
                "calls_per_step": [c / steps for c in self.calls], "max_over_mean": mom}

    def remove(self):
        for h in self.handles:
            h.remove()


_TT_BASE = {"llama": "llama3", "qwen3": "qwen3", "qwen3_moe": "qwen3", "deepseek_v3": "deepseek_v3"}
_tt_counter = [0]


def tt_session(spec, dims, device, notes):
    import torch
    import torchtitan.protocols.train_spec as ts
    from torchtitan.config import JobConfig
    from torchtitan.train import Trainer

    base = ts.get_train_spec(_TT_BASE[dims["family"]])
    args = _tt_model_args(dims, spec["seq"])
    _tt_counter[0] += 1
    name = f"bench_{os.getpid()}_{_tt_counter[0]}"
    ts.register_train_spec(name, dataclasses.replace(
        base, model_args={"bench": args}, build_dataloader_fn=None, build_tokenizer_fn=None,
        build_validator_fn=None, state_dict_adapter=None))
    jc = JobConfig()
    jc.job.dump_folder = "/tmp/torchtitan_bench"
    jc.model.name = name
    jc.model.flavor = "bench"
    jc.training.local_batch_size = spec["micro_batch"]
    jc.training.seq_len = spec["seq"]
    jc.training.steps = 100000
    jc.training.max_norm = 1.0
    jc.lr_scheduler.warmup_steps = 2
    jc.metrics.log_freq = 1000000000
    jc.activation_checkpoint.mode = "full" if spec["recompute"] == "full" else "none"
    jc.compile.enable = bool(spec["compile"])
    jc.compile.components = ["model", "loss"]
    jc.optimizer.implementation = "fused" if device != "cpu" else "foreach"
    if dims["experts"]:
        jc.debug.moe_force_load_balance = bool(spec.get("balance"))
        if spec.get("balance"):
            notes.append("moe_force_load_balance")
    if spec["precision"] == "bf16-full":
        jc.training.dtype = "bfloat16"
    if spec["precision"] == "fp8-rowwise":
        jc.model.converters = ["quantize.linear.float8"]
        jc.quantize.linear.float8.recipe_name = "rowwise"
        jc.quantize.linear.float8.filter_fqns = ["output"]
        notes.append("fp8=torchtitan quantize.linear.float8 recipe rowwise, output bf16")
    if spec["precision"] == "fp8-moe":
        jc.model.converters = ["quantize.linear.float8", "quantize.grouped_mm.float8"]
        jc.quantize.linear.float8.filter_fqns = ["output"]
        jc.quantize.grouped_mm.float8.fqns = ["experts"]
        notes.append("fp8=linear tensorwise + quantize.grouped_mm.float8 on experts (prototype)")
    if spec["precision"] == "fp8":
        jc.model.converters = ["quantize.linear.float8"]
        jc.quantize.linear.float8.filter_fqns = ["output"]
        notes.append("fp8=torchtitan quantize.linear.float8 (torchao tensorwise), output bf16")
    if spec["precision"].startswith("fp8") and device == "cpu":
        # the dry run: emulated FP8, which torchtitan allows only eager
        jc.quantize.linear.float8.emulate = True
        jc.compile.enable = False
        notes.append("emulated FP8 (dry run)")
    trainer = Trainer(jc)
    model = trainer.model_parts[0]
    hist = RouterHist(model) if dims["experts"] else None
    mb, seq = spec["micro_batch"], spec["seq"]
    gen = torch.Generator().manual_seed(0)
    data = [torch.randint(0, dims["vocab"], (mb, seq + 1), generator=gen) for _ in range(2)]

    def it():
        i = 0
        while True:
            x = data[i % 2]
            i += 1
            yield {"input": x[:, :-1].contiguous()}, x[:, 1:].contiguous()

    data_iter = it()

    def step():
        trainer.step = 2  # never a logging step (log_freq 1e9, step != 1)
        trainer.train_step(data_iter)
        return None

    def cleanup():
        nonlocal trainer, model
        if hist:
            hist.remove()
        try:
            trainer.close()
        except Exception:
            pass
        del trainer, model

    return step, (lambda: model), cleanup, hist


def is_oom(exc):
    s = f"{type(exc).__name__}: {exc}"
    return ("OutOfMemoryError" in s or "out of memory" in s.lower()
            or "CUBLAS_STATUS_ALLOC_FAILED" in s)


def run_one(spec, args, fh):
    import torch
    device = "cpu" if args.dry_run else "cuda"
    dims = MODELS[spec["model"]]
    if args.dry_run:
        dims = tiny_dims(dims)
    notes = []
    row = {k: "" for k in CSV_COLUMNS}
    row.update(run_id=spec["run_id"], framework=spec["framework"], model=spec["model"],
               layers=dims["layers"], hidden=dims["hidden"], ffn=dims["ffn"], heads=dims["heads"],
               kv_heads=dims["kv_heads"], vocab=dims["vocab"], experts=dims["experts"],
               topk=dims["topk"], moe_ffn=dims["moe_ffn"], micro_batch=spec["micro_batch"],
               seq=spec["seq"], recompute=spec["recompute"],
               precision=PRECISIONS[spec["precision"]],
               compile=spec["compile"], torch_version=torch.__version__)
    if spec["framework"] == "hf":
        import transformers
        row["framework_version"] = f"transformers {transformers.__version__}"
    else:
        try:
            from importlib.metadata import version
            row["framework_version"] = f"torchtitan {version('torchtitan')}"
        except Exception:
            row["framework_version"] = "torchtitan ?"
    if device == "cuda":
        row["gpu"] = torch.cuda.get_device_name(0)
    warm = 3 if spec["compile"] else 2
    timed = args.steps
    if args.dry_run:
        warm, timed = 1, 2
    row["warmup_steps"], row["timed_steps"] = warm, timed
    t0 = time.time()
    _emit(fh, {"type": "start", "run_id": spec["run_id"], "t": t0})
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base_alloc = torch.cuda.memory_allocated()
        if base_alloc > 0:
            notes.append(f"allocated_before_run={base_alloc}")
    step = cleanup = get_model = hist = None
    hist_out = None
    status = "ok"
    exit_code = 0
    try:
        if spec["run_id"] in os.environ.get("BENCH_FAKE_OOM", "").split(","):
            raise torch.OutOfMemoryError("CUDA out of memory (BENCH_FAKE_OOM, a test of the harness)")
        sess = hf_session if spec["framework"] == "hf" else tt_session
        step, get_model, cleanup, hist = sess(spec, dims, device, notes)
        total, active, embed = active_params(get_model(), dims)
        row["n_params"], row["n_active_params"] = total, active
        flops = model_flops_per_step(dims, active - embed, spec["micro_batch"], spec["seq"])
        row["model_tflop_per_step"] = f"{flops / 1e12:.3f}"
        for _ in range(warm):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        row["setup_s"] = f"{time.time() - t0:.1f}"
        if hist:
            hist.on = True  # the router's counts over the timed steps only
        times = []
        for _ in range(timed):
            if device == "cuda":
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
                step()
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1))
            else:
                a = time.perf_counter()
                step()
                times.append((time.perf_counter() - a) * 1e3)
        if hist:
            hist.on = False
            hist_out = hist.result(timed)
            if hist_out:
                mom = hist_out["max_over_mean"]
                notes.append(f"router_max_over_mean={'/'.join(f'{x:.3f}' for x in mom)}")
        times.sort()
        n = len(times)
        med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
        row["step_ms_median"] = f"{med:.2f}"
        row["step_ms_min"] = f"{times[0]:.2f}"
        row["step_ms_max"] = f"{times[-1]:.2f}"
        row["tokens_per_s"] = f"{spec['micro_batch'] * spec['seq'] / (med / 1e3):.0f}"
        row["model_tflops_per_s"] = f"{flops / (med / 1e3) / 1e12:.1f}"
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        if is_oom(exc):
            status = "OOM"
            exit_code = 3
            msg = str(exc).split("\n")[0][:200]
            notes.append(f"OOM: {msg}")
        else:
            status = "ERROR"
            exit_code = 5 if ("CUDA" in str(exc) or "NCCL" in str(exc)) else 4
            tb = traceback.format_exc()
            print(tb, file=sys.stderr, flush=True)
            last = [l for l in tb.strip().split("\n") if l.strip()][-1]
            notes.append(f"{type(exc).__name__}: {last[:300]}")
    if device == "cuda":
        row["peak_alloc_bytes"] = torch.cuda.max_memory_allocated()
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    row["status"] = status
    row["wall_s"] = f"{time.time() - t0:.1f}"
    row["notes"] = "; ".join(notes).replace("\n", " ")
    try:
        if cleanup:
            cleanup()
    except Exception:
        pass
    step = get_model = cleanup = hist = None
    gc.collect()
    try:
        import torch._dynamo
        torch._dynamo.reset()
    except Exception:
        pass
    if device == "cuda":
        torch.cuda.empty_cache()
        left = torch.cuda.memory_allocated()
        if left > (1 << 30) and exit_code == 0:
            # something of this run is still alive: a fresh process for the next run,
            # so that its peak is its own
            row["notes"] = (row["notes"] + "; " if row["notes"] else "") + f"left_allocated={left}"
            exit_code = 6
    ev = {"type": "result", "row": row}
    if hist_out:
        ev["hist"] = hist_out
    _emit(fh, ev)
    return exit_code


def setup_worker_env(args):
    os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                 ("LOCAL_WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(k, v)
    if "MASTER_PORT" not in os.environ:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
        s.close()
    if args.dry_run:
        # torchtitan picks "cuda" when no accelerator is there; the dry run is on the CPU
        import torch
        import torchtitan.train  # noqa: F401 - loads the modules patched below
        import torchtitan.components.metrics as cm
        import torchtitan.models.moe  # noqa: F401
        for name, mod in list(sys.modules.items()):
            if name.startswith("torchtitan") and getattr(mod, "device_type", None) == "cuda":
                mod.device_type, mod.device_module = "cpu", torch.cpu
        # torchtitan's router counts tokens with histc on integers, which the CPU lacks
        _histc = torch.histc

        def histc(x, *a, **k):
            if not x.is_floating_point() and x.device.type == "cpu":
                return _histc(x.float(), *a, **k).to(x.dtype)
            return _histc(x, *a, **k)
        torch.histc = histc
        # and permutes tokens with a Triton kernel: its CPU version instead
        import functools
        import torchtitan.models.moe.utils as mu
        mu.generate_permute_indices = functools.partial(mu.generate_permute_indices, use_cpu=True)

        class _Mem:
            device_name = "cpu"

            def get_peak_stats(self):
                class S:
                    max_reserved_gib = max_reserved_pct = max_active_gib = 0.0
                    max_active_pct = num_alloc_retries = num_ooms = 0
                return S()

            def reset_peak_stats(self):
                pass

        cm.build_device_memory_monitor = lambda: _Mem()


def worker_main(args):
    setup_worker_env(args)
    with open(args.runs_json) as f:
        runs = json.load(f)
    deadline = args.deadline
    with open(args.events, "a") as fh:
        for spec in runs:
            if deadline and time.time() + 10 > deadline:
                return 0
            code = run_one(spec, args, fh)
            # a fresh process after an OOM (3), a CUDA error that may have broken the
            # context (5), or memory the run left allocated (6)
            if code in (3, 5, 6):
                return code
    return 0


# ----------------------------------------------------------------------------
# Parent side
# ----------------------------------------------------------------------------

def blank_row(spec, status, note):
    dims = MODELS[spec["model"]]
    row = {k: "" for k in CSV_COLUMNS}
    row.update(run_id=spec["run_id"], framework=spec["framework"], model=spec["model"],
               layers=dims["layers"], hidden=dims["hidden"], ffn=dims["ffn"], heads=dims["heads"],
               kv_heads=dims["kv_heads"], vocab=dims["vocab"], experts=dims["experts"],
               topk=dims["topk"], moe_ffn=dims["moe_ffn"], micro_batch=spec["micro_batch"],
               seq=spec["seq"], recompute=spec["recompute"],
               precision=PRECISIONS[spec["precision"]],
               compile=spec["compile"], status=status, notes=note)
    return row


def run_group(runs, args, deadline, log_fh, rows):
    """Runs one framework's list through worker processes; appends rows."""
    remaining = list(runs)
    tmpdir = args.tmpdir
    os.makedirs(tmpdir, exist_ok=True)
    spawn = 0
    early_deaths = 0
    while remaining:
        if time.time() + 15 > deadline:
            for spec in remaining:
                rows.append(blank_row(spec, "SKIPPED", "time budget of the matrix spent"))
            return
        spawn += 1
        tag = f"{remaining[0]['framework']}_{spawn}"
        runs_json = os.path.join(tmpdir, f"runs_{tag}.json")
        events = os.path.join(tmpdir, f"events_{tag}.jsonl")
        with open(runs_json, "w") as f:
            json.dump(remaining, f)
        open(events, "w").close()
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--runs-json", runs_json,
               "--events", events, "--deadline", str(deadline), "--steps", str(args.steps)]
        if args.dry_run:
            cmd.append("--dry-run")
        log_fh.write(f"\n===== worker {tag}: {len(remaining)} runs, first {remaining[0]['run_id']}\n")
        log_fh.flush()
        p = subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True)
        seen = 0
        current = None
        started_at = time.time()
        killed = None
        while True:
            time.sleep(0.5)
            with open(events) as f:
                lines = f.read().splitlines()
            for line in lines[seen:]:
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    break  # a half-written line: read it next time
                seen += 1
                if ev["type"] == "start":
                    current = ev["run_id"]
                    started_at = time.time()
                elif ev["type"] == "result":
                    rows.append(ev["row"])
                    if ev.get("hist"):
                        args.hists[ev["row"]["run_id"]] = ev["hist"]
                    print(f"[{ev['row']['run_id']}] {ev['row']['framework']} {ev['row']['model']} "
                          f"mb{ev['row']['micro_batch']} s{ev['row']['seq']} "
                          f"rc={ev['row']['recompute']} c={ev['row']['compile']} "
                          f"{ev['row']['precision']}: {ev['row']['status']} "
                          f"{ev['row']['step_ms_median']} ms, peak "
                          f"{(int(ev['row']['peak_alloc_bytes'] or 0)) / 2**30:.1f} GiB, "
                          f"wall {ev['row']['wall_s']} s", flush=True)
                    remaining = [r for r in remaining if r["run_id"] != ev["row"]["run_id"]]
                    current = None
            if p.poll() is not None:
                break
            now = time.time()
            spec = next((r for r in remaining if r["run_id"] == current), None)
            limit = spec["timeout_s"] if spec else 120  # import + first build
            if now - started_at > limit or now > deadline:
                killed = "TIMEOUT" if now - started_at > limit else "SKIPPED"
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
                break
        # read any last lines
        with open(events) as f:
            lines = f.read().splitlines()
        for line in lines[seen:]:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if ev["type"] == "result":
                rows.append(ev["row"])
                if ev.get("hist"):
                    args.hists[ev["row"]["run_id"]] = ev["hist"]
                remaining = [r for r in remaining if r["run_id"] != ev["row"]["run_id"]]
                current = None
            elif ev["type"] == "start":
                current = ev["run_id"]
        if seen:
            early_deaths = 0
        if current is not None:
            spec = next((r for r in remaining if r["run_id"] == current), None)
            if spec:
                if killed == "TIMEOUT":
                    rows.append(blank_row(spec, "TIMEOUT", f"killed after {spec['timeout_s']} s"))
                elif killed == "SKIPPED":
                    rows.append(blank_row(spec, "SKIPPED", "killed at the matrix deadline"))
                else:
                    rows.append(blank_row(spec, "ERROR",
                                          f"worker died (exit {p.returncode}) during the run"))
                remaining = [r for r in remaining if r["run_id"] != current]
        elif p.returncode not in (0, 3, 5, 6) and killed is None and remaining:
            # died between runs (e.g. at import): charge the next run so the loop ends,
            # and after two such deaths in a row all the rest
            spec = remaining.pop(0)
            rows.append(blank_row(spec, "ERROR", f"worker exited {p.returncode} before the run"))
            early_deaths += 1
            if early_deaths >= 2:
                for spec in remaining:
                    rows.append(blank_row(spec, "ERROR", "workers die before any run (see the log)"))
                return
            continue
        elif killed == "TIMEOUT" and remaining and current is None:
            spec = remaining.pop(0)
            rows.append(blank_row(spec, "TIMEOUT", "worker start (imports) took too long"))
        if killed == "SKIPPED":
            for spec in remaining:
                rows.append(blank_row(spec, "SKIPPED", "time budget of the matrix spent"))
            return
        if p.returncode == 0 and remaining and killed is None:
            # the worker stopped at its deadline
            for spec in remaining:
                rows.append(blank_row(spec, "SKIPPED", "time budget of the matrix spent"))
            return


def write_hists(args, rows):
    """The side file: run_id -> the router's counts per MoE layer over the timed steps, with
    the run's shape, so that the imbalance can be modelled from it (to_layout_runs.py)."""
    if not args.hist_out:
        return
    by_id = {r["run_id"]: r for r in rows}
    out = {}
    for rid, h in sorted(args.hists.items()):
        r = by_id.get(rid, {})
        mb, seq = int(r.get("micro_batch") or 0), int(r.get("seq") or 0)
        topk = int(r.get("topk") or 0)
        out[rid] = dict(model=r.get("model"), experts=int(r.get("experts") or 0), topk=topk,
                        tokens_per_step=mb * seq, choices_per_step=mb * seq * topk,
                        recompute=r.get("recompute"), gpu=r.get("gpu"), **h)
    with open(args.hist_out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def write_csv(path, rows, order):
    rank = {rid: i for i, rid in enumerate(order)}
    rows = sorted(rows, key=lambda r: rank.get(r["run_id"], 1 << 30))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def parent_main(args):
    if args.matrix == "extra":
        tt, hf = extra_matrix()
        tt = assign_ids_and_timeouts(tt, "tx")
        hf = assign_ids_and_timeouts(hf, "hx")
    elif args.matrix == "moe":
        tt, hf = moe_matrix()
        tt = assign_ids_and_timeouts(tt, "tm")
    else:
        tt, hf = default_matrix()
        tt = assign_ids_and_timeouts(tt, "tt")
        hf = assign_ids_and_timeouts(hf, "hf")
    groups = []
    if args.frameworks in ("all", "torchtitan") and tt:
        groups.append(tt)
    if args.frameworks in ("all", "hf") and hf:
        groups.append(hf)
    if args.only:
        # the runs named, in the order named (a budget then cuts from the end of the list)
        want = args.only.split(",")
        rank = {rid: i for i, rid in enumerate(want)}
        groups = [sorted([r for r in g if r["run_id"] in rank], key=lambda r: rank[r["run_id"]])
                  for g in groups]
        groups = [g for g in groups if g]
    if args.run_timeout:
        for g in groups:
            for r in g:
                r["timeout_s"] = args.run_timeout
    if args.dry_run:
        for g in groups:
            for r in g:
                r["seq"] = min(r["seq"], 64)
                if not args.run_timeout:
                    r["timeout_s"] = 240 if r["compile"] else 120
    order = [r["run_id"] for g in groups for r in g]
    t0 = time.time()
    end = t0 + args.budget_s
    rows = []
    args.hists = {}
    shares = [0.55, 0.45] if len(groups) == 2 else [1.0]
    with open(args.log, "a") as log_fh:
        for gi, g in enumerate(groups):
            # each group gets its share of what is left, the last one all of it
            left = end - time.time()
            share = shares[gi] / sum(shares[gi:])
            deadline = time.time() + left * share if gi < len(groups) - 1 else end
            run_group(g, args, deadline, log_fh, rows)
            write_csv(args.out, rows, order)
            write_hists(args, rows)
    write_csv(args.out, rows, order)
    write_hists(args, rows)
    n_ok = sum(1 for r in rows if r["status"] == "ok")
    print(f"matrix: {len(rows)} rows, {n_ok} ok, "
          f"{sum(1 for r in rows if r['status'] == 'OOM')} OOM, "
          f"{sum(1 for r in rows if r['status'] not in ('ok', 'OOM'))} other, "
          f"{time.time() - t0:.0f} s -> {args.out}", flush=True)
    return 0


def summary(path):
    """A markdown table of a results CSV (the README's)."""
    rows = list(csv.DictReader(open(path)))
    print("| run | framework | model | mb x seq | recompute | precision | compile | status | step ms "
          "(min-max) | tokens/s | model TFLOP/s | peak alloc / reserved GiB |")
    print("|---|---|---|---|---|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        gib = (lambda b: f"{int(b) / 2 ** 30:.1f}" if b else "-")
        ms = (f"{r['step_ms_median']} ({r['step_ms_min']}-{r['step_ms_max']})"
              if r["step_ms_median"] else "-")
        print(f"| {r['run_id']} | {r['framework']} | {r['model']} | {r['micro_batch']}x{r['seq']} | "
              f"{r['recompute']} | {r['precision']} | {r['compile']} | {r['status']} | {ms} | "
              f"{r['tokens_per_s'] or '-'} | {r['model_tflops_per_s'] or '-'} | "
              f"{gib(r['peak_alloc_bytes'])} / {gib(r['peak_reserved_bytes'])} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="frameworks.csv")
    ap.add_argument("--log", default="frameworks.log")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="wall-clock budget of the whole matrix")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per run (after warm-up)")
    ap.add_argument("--frameworks", default="all", choices=["all", "hf", "torchtitan"])
    ap.add_argument("--only", default="", help="comma-separated run ids")
    ap.add_argument("--matrix", default="default", choices=["default", "extra", "moe"],
                    help="default: the first call's 43 runs; extra: the second call's; moe: issue 33's "
                         "MoE runs (torchtitan)")
    ap.add_argument("--hist-out", default="",
                    help="JSON side file: each MoE run's per-expert token counts per MoE layer, "
                         "summed over the timed steps, keyed by run_id")
    ap.add_argument("--dry-run", action="store_true", help="tiny models on the CPU")
    ap.add_argument("--run-timeout", type=float, default=0.0,
                    help="one timeout (s) for every run instead of the matrix's own")
    ap.add_argument("--tmpdir", default="/tmp/bench_frameworks")
    ap.add_argument("--list", action="store_true", help="print the matrix and exit")
    ap.add_argument("--summary", metavar="CSV", help="print a results CSV as a markdown table and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--runs-json", help=argparse.SUPPRESS)
    ap.add_argument("--events", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.exit(worker_main(args))
    if args.summary:
        summary(args.summary)
        return 0
    if args.list:
        tt, hf = {"default": default_matrix, "extra": extra_matrix, "moe": moe_matrix}[args.matrix]()
        pre = {"default": ("tt", "hf"), "extra": ("tx", "hx"), "moe": ("tm", "hm")}[args.matrix]
        for r in assign_ids_and_timeouts(tt, pre[0]) + assign_ids_and_timeouts(hf, pre[1]):
            print(r["run_id"], r["framework"], r["model"], f"mb{r['micro_batch']}", f"s{r['seq']}",
                  r["recompute"], f"compile={r['compile']}", r["precision"], f"timeout={r['timeout_s']}")
        return 0
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
