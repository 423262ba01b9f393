#!/usr/bin/env python3
"""count_params.py: total and active parameters of a Hugging Face config.json.

The reference the C model builders are tested against (data/models/SOURCES.md).
Counts every weight tensor the Hugging Face (transformers) implementation of
the family creates, from the config alone:

  embeddings (vocab x hidden) and the untied LM head; attention (q, k, v, o;
  GQA; head_dim that is not hidden/heads; MLA's low-rank q and kv projections
  and their RMSNorms; q/k norms; biases; gpt-oss attention sinks); dense MLPs
  (gated SwiGLU: 3 matrices; squared ReLU: 2); routed experts, shared
  experts, the router (and its bias / DeepSeek's e_score_correction_bias);
  RMSNorm / LayerNorm weights (and LayerNorm biases); DeepSeek's MTP module;
  Llama 4's vision encoder and projector.

"Active" parameters are those one token's forward pass multiplies by: every
non-expert weight, the router, the shared experts and top-k routed experts.
Two conventions are printed because publications differ:
  active_all  : counts the input embedding and the LM head (one row of the
                embedding is used, but the convention is to count the matrix);
  active_noemb: leaves the input embedding out, keeps the LM head.
The script prints both and says which one the published figure matches.

Usage:
  python3 data/models/count_params.py                 # every MoE / new file (data/models
                                                      # or data/models/pending)
  python3 data/models/count_params.py FILE.json ...   # some files
  python3 data/models/count_params.py --json ...      # machine-readable
No dependencies beyond the standard library.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

DEFAULT_FILES = [
    "deepseek-v3.json", "kimi-k2.json", "mixtral-8x7b.json", "mixtral-8x22b.json",
    "qwen3-235b-a22b.json", "qwen3-30b-a3b.json", "gpt-oss-120b.json", "gpt-oss-20b.json",
    "llama-4-scout.json", "qwen3-32b.json", "nemotron-4-15b.json", "nemotron-4-340b.json",
    "mistral-nemo-12b.json",
    # the dense files already shipped, as a check of the counter itself
    "llama-3-8b.json", "mistral-7b.json", "qwen2-7b.json",
]


def find(name):
    """A shipped file: data/models/NAME, else data/models/pending/NAME (files
    the C parser does not read yet wait there; see SOURCES.md)."""
    for d in (HERE, os.path.join(HERE, "pending")):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


class Count:
    """Parameters by part; 'active' is what one token uses."""

    def __init__(self):
        self.parts = {}   # name -> (total, active)

    def add(self, name, total, active=None):
        t, a = self.parts.get(name, (0, 0))
        self.parts[name] = (t + total, a + (total if active is None else active))

    @property
    def total(self):
        return sum(t for t, _ in self.parts.values())

    @property
    def active(self):
        return sum(a for _, a in self.parts.values())


def gated(h, f):          # SwiGLU: gate, up, down
    return 3 * h * f


def embeddings(c, cfg, h, vocab):
    c.add("embedding", vocab * h, vocab * h)
    c.add("final_norm", h)
    if not cfg.get("tie_word_embeddings", False):
        c.add("lm_head", vocab * h)


# ---------------------------------------------------------------- attention
def gqa_attention(cfg, h):
    """q, k, v, o with GQA and an explicit head_dim; returns per-layer count."""
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or h // nh
    n = h * nh * hd + 2 * h * nkv * hd + nh * hd * h
    mt = cfg.get("model_type", "")
    if mt == "qwen2" or cfg.get("attention_bias"):
        n += nh * hd + 2 * nkv * hd          # q, k, v biases
    if cfg.get("attention_bias") and mt in ("gpt_oss",):
        n += h                               # o_proj bias (gpt-oss)
    if mt in ("qwen3", "qwen3_moe"):
        n += 2 * hd                          # q_norm, k_norm over head_dim
    if mt == "gpt_oss":
        n += nh                              # one attention sink per head
    return n


def mla_attention(cfg, h):
    """DeepSeek-V2/V3 multi-head latent attention, per layer."""
    nh = cfg["num_attention_heads"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    qr, kvr = cfg.get("q_lora_rank"), cfg["kv_lora_rank"]
    n = 0
    if qr:
        n += h * qr + qr + qr * nh * (nope + rope)     # q_a_proj, q_a_layernorm, q_b_proj
    else:
        n += h * nh * (nope + rope)                    # q_proj
    n += h * (kvr + rope) + kvr                        # kv_a_proj_with_mqa, kv_a_layernorm
    n += kvr * nh * (nope + vd)                        # kv_b_proj
    n += nh * vd * h                                   # o_proj
    return n


# ---------------------------------------------------------------- families
def count_dense(cfg):
    c = Count()
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    f = cfg["intermediate_size"]
    mt = cfg.get("model_type", "")
    embeddings(c, cfg, h, V)
    c.add("attention", L * gqa_attention(cfg, h))
    if cfg.get("hidden_act") == "relu2":         # Nemotron: up, down (no gate)
        c.add("mlp", L * 2 * h * f)
    else:
        c.add("mlp", L * gated(h, f))
    norm = 2 * h if mt == "nemotron" else h      # Nemotron LayerNorm1P has a bias
    c.add("norms", L * 2 * norm)
    if mt == "nemotron":
        c.add("final_norm", h)                   # final LayerNorm bias
    return c


def count_deepseek(cfg):
    """deepseek_v3 and kimi_k2 (same HF module)."""
    c = Count()
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    kdense = cfg.get("first_k_dense_replace", 0)
    freq = cfg.get("moe_layer_freq", 1)
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    fe, fs = cfg["moe_intermediate_size"], cfg.get("n_shared_experts", 0) or 0
    embeddings(c, cfg, h, V)

    def layer(c, i, tag):
        c.add(tag + "attention", mla_attention(cfg, h))
        c.add(tag + "norms", 2 * h)
        if i >= kdense and i % freq == 0:
            c.add(tag + "experts", E * gated(h, fe), k * gated(h, fe))
            c.add(tag + "shared_experts", gated(h, fe * fs))
            router = E * h + (E if cfg.get("topk_method") == "noaux_tc" else 0)
            c.add(tag + "router", router)
        else:
            c.add(tag + "dense_mlp", gated(h, cfg["intermediate_size"]))

    for i in range(L):
        layer(c, i, "")
    mtp = Count()
    for j in range(cfg.get("num_nextn_predict_layers", 0) or 0):
        mtp.add("mtp.enorm_hnorm", 2 * h)
        mtp.add("mtp.eh_proj", 2 * h * h)
        layer(mtp, L + j, "mtp.")
        mtp.add("mtp.shared_head.norm", h)
    return c, mtp


def count_mixtral(cfg):
    c = Count()
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    E, k, f = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["intermediate_size"]
    embeddings(c, cfg, h, V)
    c.add("attention", L * gqa_attention(cfg, h))
    c.add("experts", L * E * gated(h, f), L * k * gated(h, f))
    c.add("router", L * E * h)
    c.add("norms", L * 2 * h)
    return c


def count_qwen3_moe(cfg):
    c = Count()
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    E, k, fe = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"]
    step = cfg.get("decoder_sparse_step", 1)
    dense_only = set(cfg.get("mlp_only_layers") or [])
    embeddings(c, cfg, h, V)
    c.add("attention", L * gqa_attention(cfg, h))
    for i in range(L):
        if i not in dense_only and E > 0 and (i + 1) % step == 0:
            c.add("experts", E * gated(h, fe), k * gated(h, fe))
            c.add("router", E * h)
        else:
            c.add("dense_mlp", gated(h, cfg["intermediate_size"]))
    c.add("norms", L * 2 * h)
    return c


def count_gpt_oss(cfg):
    c = Count()
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    E = cfg["num_local_experts"]
    k = cfg.get("num_experts_per_tok") or cfg["experts_per_token"]
    f = cfg["intermediate_size"]
    expert = 2 * f * h + 2 * f + f * h + h       # gate_up (fused) + bias, down + bias
    embeddings(c, cfg, h, V)
    c.add("attention", L * gqa_attention(cfg, h))
    c.add("experts", L * E * expert, L * k * expert)
    c.add("router", L * (E * h + E))
    c.add("norms", L * 2 * h)
    return c


def count_llama4(cfg):
    t = cfg["text_config"]
    c = Count()
    h, L, V = t["hidden_size"], t["num_hidden_layers"], t["vocab_size"]
    E, k = t["num_local_experts"], t["num_experts_per_tok"]
    f, fd = t["intermediate_size"], t["intermediate_size_mlp"]
    step = t.get("interleave_moe_layer_step", 1)
    moe_layers = set(t.get("moe_layers") or range(step - 1, L, step))
    embeddings(c, dict(t, tie_word_embeddings=cfg.get("tie_word_embeddings", False)), h, V)
    c.add("attention", L * gqa_attention(dict(t, model_type="llama4_text"), h))  # QK L2-norm has no weight
    for i in range(L):
        if i in moe_layers:
            c.add("experts", E * gated(h, f), k * gated(h, f))
            c.add("shared_experts", gated(h, f))
            c.add("router", E * h)
        else:
            c.add("dense_mlp", gated(h, fd))
    c.add("norms", L * 2 * h)
    # vision encoder (Llama4VisionModel) and projector: total only, no token of text uses them
    v = cfg.get("vision_config")
    if v:
        vh, vf, vl = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
        p, ch, img = v["patch_size"], v["num_channels"], v["image_size"]
        n_patch = (img // p) ** 2
        vis = ch * p * p * vh + vh + (n_patch + 1) * vh + 4 * vh        # patch, class, pos, pre/post LN (w, b)
        vis += vl * (4 * (vh * vh + vh) + vh * vf + vf + vf * vh + vh + 4 * vh)
        shuffle_in = int(vh / (v["pixel_shuffle_ratio"] ** 2))          # pixel shuffle: 1408 -> 5632
        vis += shuffle_in * v["projector_input_dim"] + v["projector_input_dim"] * v["projector_output_dim"]
        vis += v["vision_output_dim"] * h                                # multi_modal_projector
        c.add("vision", vis, 0)
    return c


def count(cfg):
    """Returns (Count of the main model, Count of extra modules such as MTP)."""
    mt = cfg.get("model_type", "")
    if mt in ("deepseek_v3", "kimi_k2", "deepseek_v2"):
        return count_deepseek(cfg)
    if mt == "mixtral":
        return count_mixtral(cfg), Count()
    if mt == "qwen3_moe":
        return count_qwen3_moe(cfg), Count()
    if mt == "gpt_oss":
        return count_gpt_oss(cfg), Count()
    if mt == "llama4":
        return count_llama4(cfg), Count()
    return count_dense(cfg), Count()


def report(path):
    cfg = json.load(open(path))
    main, extra = count(cfg)
    emb = main.parts["embedding"][0]
    vision = main.parts.get("vision", (0, 0))[0]
    r = {
        "file": os.path.basename(path),
        "name": cfg.get("name", cfg.get("model_type")),
        "total": main.total,
        "total_text": main.total - vision,
        "active_all": main.active,
        "active_noemb": main.active - emb,
        "embedding": emb,
        "non_embedding": main.total - emb - main.parts.get("lm_head", (0, 0))[0],
        "extra_modules": extra.total,
        "extra_active": extra.active,
        "parts": {k: list(v) for k, v in main.parts.items()},
        "published_total_b": cfg.get("published_params_b"),
        "published_active_b": cfg.get("published_active_params_b"),
        "published_non_embedding_b": cfg.get("published_non_embedding_params_b"),
    }
    return r


def pct(x, ref):
    return "%+.2f%%" % (100.0 * (x - ref) / ref) if ref else "-"


def main(argv):
    as_json = "--json" in argv
    args = [a for a in argv if a != "--json"]
    files = args or [p for p in (find(f) for f in DEFAULT_FILES) if p]
    rows = [report(f) for f in files]
    if as_json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    print("%-18s %18s %9s %16s %16s %9s %9s %s" % ("model", "total", "pub(B)", "active_all",
                                                   "active_noemb", "pub(B)", "d_total", "d_active (all / noemb)"))
    for r in rows:
        pt, pa = r["published_total_b"], r["published_active_b"]
        t = r["total"]
        line = "%-18s %18s %9s %16s %16s %9s %9s" % (
            r["name"], format(t, ","), pt if pt is not None else "-", format(r["active_all"], ","),
            format(r["active_noemb"], ","), pa if pa is not None else "-", pct(t / 1e9, pt))
        if pa:
            line += " %s / %s" % (pct(r["active_all"] / 1e9, pa), pct(r["active_noemb"] / 1e9, pa))
        print(line)
        if r["extra_modules"]:
            print("%-18s   + MTP module(s): %s params (%s active), not in the total above"
                  % ("", format(r["extra_modules"], ","), format(r["extra_active"], ",")))
        if r["published_non_embedding_b"]:
            print("%-18s   non-embedding (no embedding, no head) %s, published %sB: %s"
                  % ("", format(r["non_embedding"], ","), r["published_non_embedding_b"],
                     pct(r["non_embedding"] / 1e9, r["published_non_embedding_b"])))
        if r["total_text"] != t:
            print("%-18s   of which text model %s, vision encoder + projector %s"
                  % ("", format(r["total_text"], ","), format(t - r["total_text"], ",")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
