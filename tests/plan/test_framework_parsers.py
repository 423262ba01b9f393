"""test_framework_parsers.py: the exports of a fixed set of plans
(framework_plans.py) loaded by each framework's own parsers, at the versions
plan/plan_framework.h pins, on the CPU; the parsed values compared with the
plan placer simulated (the export's plan.json, `placer plan --export json`):

  megatron    Megatron-Core 0.16.1's TransformerConfig / MLATransformerConfig
              (with their MoE fields and the ModelParallelConfig they extend)
              and DistributedDataParallelConfig, built from the exported
              arguments the way Megatron-LM's core_transformer_config_from_args
              does, with their validation; every flag must be one Megatron-LM's
              own parser knows (megatron_lm_flags.txt, its output at the pinned
              commit: scripts/check-megatron-lm.py runs the whole parser)
  torchtitan  torchtitan 0.2.2's ConfigManager on job.toml, ParallelDims with
              its device mesh (over a fake process group of the plan's world),
              the model registry (the flavor built on the meta device: its
              layers, widths, heads, experts), the schedule class, the model
              converters for FP8
  deepspeed   DeepSpeed 0.19.8's DeepSpeedConfig on ds_config.json and its
              PipelineModule (over a fake process group) built by the
              export's pipeline.py with the exported stage boundaries

Compared: layers, widths, heads, experts, top-k, tp / pp / vp / cp / ep / dp,
micro and global batch, the FP8 recipe, the pipeline order, the stage split;
a refused cell must be exit 2 with one line naming the framework's version.

Stubs, each where a framework asks the GPU while it parses (there is none):
  STUB torchtitan.components.quantization.{float8,mx}.has_cuda_capability
       -> True: the FP8 / MX converters refuse to build below SM 8.9 / 10.0
Environment: DS_ACCELERATOR=cuda (DeepSpeed's CPU accelerator would compile
a shared-memory op; the CUDA one parses without a device).

PLACER_BIN names the placer binary; PLACER_PARSERS_TABLE=FILE writes the
plans x frameworks table (docs/exports.md) after the run.
"""
import concurrent.futures
import dataclasses
import importlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from framework_plans import FRAMEWORKS, PLANS  # noqa: E402

PLACER = os.environ.get("PLACER_BIN", os.path.join(ROOT, "build", "cli", "placer"))
VERSIONS = {"megatron": "Megatron-LM d98e8a6 (megatron-core 0.16.1)", "torchtitan": "torchtitan 0.2.2",
            "deepspeed": "DeepSpeed 0.19.8"}
STUBS = ["torchtitan.components.quantization.{float8,mx}.has_cuda_capability -> True"]
os.environ.setdefault("DS_ACCELERATOR", "cuda")
os.environ.setdefault("LOCAL_RANK", "0")

CELLS = {}  # (plan, framework) -> the table's cell


@dataclasses.dataclass
class Export:
    plan: str
    framework: str
    rc: int
    stderr: str
    dir: str


def _export(work, name, args, fw):
    d = os.path.join(work, name, fw)
    cmd = [PLACER, "plan", *shlex.split(args), "--framework", fw, "--export", fw, "--out", d]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return Export(name, fw, p.returncode, p.stderr, d)


@pytest.fixture(scope="session")
def exports(tmp_path_factory, request):
    """Every plan exported for every framework (placer runs in parallel)."""
    assert os.access(PLACER, os.X_OK), f"no placer binary at {PLACER}"
    work = str(tmp_path_factory.mktemp("exports"))
    jobs = [(n, a, f) for n, a in PLANS for f in FRAMEWORKS]
    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        done = list(ex.map(lambda j: _export(work, *j), jobs))
    request.addfinalizer(_write_table)
    return {(e.plan, e.framework): e for e in done}


def _write_table():
    out = os.environ.get("PLACER_PARSERS_TABLE")
    if not out:
        return
    rows = ["| plan | placer plan ... | " + " | ".join(VERSIONS[f] for f in FRAMEWORKS) + " |",
            "|---|---|" + "---|" * len(FRAMEWORKS)]
    for name, args in PLANS:
        cells = [CELLS.get((name, f), "FAILED (see the test log)") for f in FRAMEWORKS]
        rows.append(f"| {name} | `{args}` | " + " | ".join(cells) + " |")
    with open(out, "w") as f:
        f.write("\n".join(rows) + "\n")


def _plan_or_refusal(ex):
    """The plan (plan.json) of an export, or None for a refusal, checked to be
    exit 2 with one line that names the framework's version."""
    if ex.rc == 2:
        lines = ex.stderr.strip().splitlines()
        assert len(lines) == 1, f"a refusal is one line: {ex.stderr}"
        assert lines[0].startswith("placer plan: ") and VERSIONS[ex.framework] in lines[0], lines[0]
        assert not os.path.exists(ex.dir), "a refusal writes nothing"
        CELLS[(ex.plan, ex.framework)] = "refused: " + lines[0][len("placer plan: "):].replace("|", "/")
        return None
    assert ex.rc == 0, f"placer plan failed ({ex.rc}): {ex.stderr}"
    with open(os.path.join(ex.dir, "plan.json")) as f:
        plan = json.load(f)
    assert plan["framework"]["name"] == ex.framework
    return plan


def _short(lay):
    """The layout as placer plan's table writes it: tp2 cp1 pp8x3 dp4 ep8 mbs1 none z1 [fp8:R] [sched]."""
    pp = f"pp{lay['pp']}" + (f"x{lay['vp']}" if lay["vp"] > 1 else "")
    ep = f" ep{lay['ep']}" if lay["ep"] > 1 else ""
    rc = {"none": "none", "selective": "sel", "full": "full"}[lay["recompute"]]
    z = "fsdp" if lay["zero"] == "fsdp" else "z" + ("0" if lay["zero"] == "none" else lay["zero"])
    prec = "" if lay["precision"] == "bf16" else f" {lay['precision']}" + (f":{lay['fp8']}" if "fp8" in lay else "")
    sched = "" if lay["sched"] in ("1f1b", "interleaved") else f" {lay['sched']}"
    return f"tp{lay['tp']} cp{lay['cp']} {pp} dp{lay['dp']}{ep} mbs{lay['micro_batch']} {rc} {z}{prec}{sched}"


def _loaded(ex, plan):
    CELLS[(ex.plan, ex.framework)] = f"loads and matches ({_short(plan['layout'])})"


def _moe_pattern(m):
    """Per layer, 1 for an MoE layer (core/model_params.c's rule)."""
    if not m["experts"]:
        return [0] * m["layers"]
    every = m["moe_every"] if m["moe_every"] > 1 else 1
    return [int(i >= m["first_dense"] and (i - m["first_dense"]) % every == every - 1) for i in range(m["layers"])]


NAMES = [n for n, _ in PLANS]

# ---- Megatron-Core ----------------------------------------------------------


def _megatron_flags():
    with open(os.path.join(HERE, "megatron_lm_flags.txt")) as f:
        return {line.strip() for line in f if line.startswith("--")}


def _parse_args_txt(path):
    """args.txt: arguments only, one a line, each but the last continued."""
    with open(path) as f:
        lines = f.read().split("\n")
    assert lines[-1] == "", "args.txt ends with a newline"
    lines = lines[:-1]
    args = {}
    for i, line in enumerate(lines):
        cont = line.endswith(" \\")
        assert cont == (i < len(lines) - 1), f"line {i + 1}: every line but the last continues: {line!r}"
        body = line[:-2] if cont else line
        assert body.startswith("--"), f"args.txt holds arguments only: {line!r}"
        flag, _, value = body.partition(" ")
        assert flag not in args, f"{flag} twice"
        args[flag] = shlex.split(value)[0] if value else True
    return args


def _num(v):
    try:
        return int(v)
    except ValueError:
        return float(v)


def _megatron_config(args, world):
    """TransformerConfig (MLA's for --multi-latent-attention) and the rest of
    what Megatron-LM builds from the arguments, as its arguments.py and
    core_transformer_config_from_args do: the same field names, these
    renames, and validate_args's derived values."""
    import torch
    import torch.nn.functional as F
    from megatron.core.activations import squared_relu
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    cls = MLATransformerConfig if "--multi-latent-attention" in args else TransformerConfig
    fields = {f.name for f in dataclasses.fields(cls)}
    renames = {"num_experts": "num_moe_experts", "norm_epsilon": "layernorm_epsilon",
               "decoder_first_pipeline_num_layers": "num_layers_in_first_pipeline_stage",
               "decoder_last_pipeline_num_layers": "num_layers_in_last_pipeline_stage"}
    # the arguments that are not TransformerConfig's: GPTModel's, the optimizer's, the batch, the vocabulary
    elsewhere = {"position_embedding_type", "untie_embeddings_and_output_weights", "make_vocab_size_divisible_by",
                 "use_distributed_optimizer", "use_torch_fsdp2", "micro_batch_size", "global_batch_size",
                 "seq_length", "max_position_embeddings", "num_layers_per_virtual_pipeline_stage",
                 "group_query_attention", "swiglu", "squared_relu", "disable_bias_linear",
                 "no_gradient_accumulation_fusion", "fp8_format", "multi_latent_attention"}
    kw, other = {}, {}
    for flag, v in args.items():
        name = flag[2:].replace("-", "_")
        name = renames.get(name, name)
        if name in elsewhere:
            other[name] = v
        elif name == "rotary_base" and cls is TransformerConfig:
            other[name] = v  # GPTModel's for standard attention
        else:
            assert name in fields, f"{flag} is neither a {cls.__name__} field nor an argument the check knows"
            if v is True:
                kw[name] = True
            elif name == "moe_layer_freq":
                kw[name] = json.loads(v)
            elif name in ("normalization", "recompute_granularity", "recompute_method", "fp8_recipe",
                          "moe_router_score_function", "moe_token_dispatcher_type", "moe_flex_dispatcher_backend",
                          "pipeline_model_parallel_layout"):
                kw[name] = v
            else:
                kw[name] = _num(v)
    tp, pp, cp = kw.get("tensor_model_parallel_size", 1), kw.get("pipeline_model_parallel_size", 1), \
        kw.get("context_parallel_size", 1)
    if "swiglu" in other:
        kw["gated_linear_unit"], kw["activation_func"] = True, F.silu
    if "squared_relu" in other:
        kw["activation_func"] = squared_relu
    if "disable_bias_linear" in other:
        kw["add_bias_linear"] = False
    kw["num_query_groups"] = kw.get("num_query_groups") if "group_query_attention" in other else None
    if "no_gradient_accumulation_fusion" in other:
        kw["gradient_accumulation_fusion"] = False
    if "fp8_format" in other:
        kw["fp8"] = other["fp8_format"]
    dtype = torch.bfloat16 if kw.get("bf16") else torch.float16 if kw.get("fp16") else torch.float32
    kw["params_dtype"] = kw["pipeline_dtype"] = dtype
    if "num_layers_per_virtual_pipeline_stage" in other:  # validate_args's derivation
        per = _num(other["num_layers_per_virtual_pipeline_stage"])
        assert kw["num_layers"] % (per * pp) == 0, "layers per virtual stage must divide the layers"
        kw["virtual_pipeline_model_parallel_size"] = kw["num_layers"] // (per * pp)
    config = cls(**kw)
    mp = ModelParallelConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(ModelParallelConfig)
                                if f.init})
    ddp = DistributedDataParallelConfig(use_distributed_optimizer="use_distributed_optimizer" in other)
    dp = world // (tp * pp * cp)
    return config, mp, ddp, other, dp


def _megatron_chunks(config, pp):
    """Decoder layers per pipeline chunk (pipeline order), as Megatron splits them."""
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    lay = config.pipeline_model_parallel_layout
    L = config.num_layers
    if lay is not None:
        assert isinstance(lay, PipelineParallelLayerLayout)
        lay.validate_layer_layout(L, None)
        vp = lay.virtual_pipeline_model_parallel_size
        return [lay.layout[c % pp][c // pp].count(LayerType.decoder) for c in range(pp * vp)]
    first, last = config.num_layers_in_first_pipeline_stage, config.num_layers_in_last_pipeline_stage
    if first is not None or last is not None:
        first = first or 0
        last = last or 0
        mid = (L - first - last) // (pp - 2) if pp > 2 else 0
        return [first] + [mid] * (pp - 2) + [last]
    vp = config.virtual_pipeline_model_parallel_size or 1
    assert L % (pp * vp) == 0, "Megatron's uniform split needs the layers divisible by the chunks"
    return [L // (pp * vp)] * (pp * vp)


@pytest.mark.parametrize("name", NAMES)
def test_megatron_core(name, exports):
    ex = exports[(name, "megatron")]
    plan = _plan_or_refusal(ex)
    if plan is None:
        return
    lay, m = plan["layout"], plan["model"]
    args = _parse_args_txt(os.path.join(ex.dir, "args.txt"))
    unknown = sorted(set(args) - _megatron_flags())
    assert not unknown, f"not Megatron-LM d98e8a6 arguments: {unknown}"
    config, mp, ddp, other, dp = _megatron_config(args, lay["world"])
    # the model
    assert config.num_layers == m["layers"]
    assert config.hidden_size == m["d_model"]
    assert config.ffn_hidden_size == m["d_ff"]
    assert config.num_attention_heads == m["heads"]
    if m["kv_lora_rank"]:
        assert (config.q_lora_rank or 0, config.kv_lora_rank, config.qk_head_dim, config.qk_pos_emb_head_dim,
                config.v_head_dim) == (m["q_lora_rank"], m["kv_lora_rank"], m["qk_nope_dim"], m["qk_rope_dim"],
                                       m["v_head_dim"])
        assert config.rotary_base == m["rope_theta"]
    else:
        assert (config.num_query_groups or config.num_attention_heads) == m["kv_heads"]
        assert config.kv_channels == m["head_dim"]
        if m["pos"] == "rotary":
            assert _num(other["rotary_base"]) == m["rope_theta"]
    assert config.normalization == {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[m["norm"]]
    assert config.gated_linear_unit == (m["mlp"] == "swiglu")
    assert config.add_bias_linear == (not m["no_bias"])
    assert config.add_qkv_bias == bool(m["qkv_bias"] and m["no_bias"])
    assert config.qk_layernorm == bool(m["qk_norm"])
    if m["norm_eps"]:
        assert config.layernorm_epsilon == m["norm_eps"]
    assert other["position_embedding_type"] == {"rotary": "rope", "learned": "learned_absolute"}[m["pos"]]
    assert ("untie_embeddings_and_output_weights" in other) == (not m["tied"])
    # experts
    assert (config.num_moe_experts or 0) == m["experts"]
    if m["experts"]:
        assert config.moe_router_topk == m["top_k"]
        assert config.moe_ffn_hidden_size == m["moe_d_ff"]
        assert (config.moe_shared_expert_intermediate_size or 0) == m["shared_d_ff"]
        freq = config.moe_layer_freq
        pattern = freq if isinstance(freq, list) else [int(i % freq == 0) for i in range(m["layers"])]
        assert pattern == _moe_pattern(m), "dense and MoE layers where the plan has them"
        assert config.moe_router_score_function == ("sigmoid" if m["router_sigmoid"] else "softmax")
        assert (config.moe_router_num_groups or 0) == m["router_groups"]
        assert config.expert_model_parallel_size == lay["ep"]
        assert config.expert_tensor_parallel_size == lay["etp"]
        assert config.moe_token_dispatcher_type == lay["dispatcher"]
    # the layout
    assert (mp.tensor_model_parallel_size, mp.pipeline_model_parallel_size, mp.context_parallel_size) == \
        (lay["tp"], lay["pp"], lay["cp"])
    assert mp.sequence_parallel == bool(lay["sp"] and lay["tp"] > 1)
    vp = config.virtual_pipeline_model_parallel_size or 1
    if config.pipeline_model_parallel_layout is not None:
        vp = config.pipeline_model_parallel_layout.virtual_pipeline_model_parallel_size
    assert vp == lay["vp"]
    assert dp == lay["dp"]
    mbs, gbs = _num(other["micro_batch_size"]), _num(other["global_batch_size"])
    assert (mbs, gbs) == (lay["micro_batch"], lay["global_batch"])
    m_batches = gbs // (mbs * dp)
    assert m_batches * mbs * dp == gbs and m_batches == lay["micro_batches"]
    if vp > 1:
        assert m_batches % lay["pp"] == 0, "interleaving needs micro-batches in multiples of pp"
    assert lay["sched"] in ("1f1b", "interleaved"), "Megatron-LM runs 1F1B and interleaved 1F1B"
    assert (lay["sched"] == "interleaved") == (vp > 1)
    assert _megatron_chunks(config, lay["pp"]) == plan["chunk_layers"]
    rc = {"none": None, "selective": "selective", "full": "full"}[lay["recompute"]]
    assert config.recompute_granularity == rc
    if rc == "full":
        assert (config.recompute_method, config.recompute_num_layers) == ("uniform", 1)
    zero = lay["zero"] if lay["dp"] > 1 else "none"
    assert zero in ("none", "1", "3"), f"zero={zero} is not one Megatron-LM runs"
    assert ddp.use_distributed_optimizer == (zero == "1")
    assert ("use_torch_fsdp2" in other) == (zero == "3")
    # the precision
    assert config.bf16 == (lay["precision"] in ("bf16", "fp8"))
    assert config.fp16 == (lay["precision"] == "fp16")
    if lay["precision"] == "fp8":
        assert str(getattr(config.fp8_recipe, "value", config.fp8_recipe)) == lay["fp8"]
        assert config.fp8 == ("e4m3" if lay["fp8"] == "blockwise" else "hybrid")
    else:
        assert not config.fp8
    with open(os.path.join(ex.dir, "env.sh")) as f:
        env = f.read()
    if zero == "3":
        assert "unset CUDA_DEVICE_MAX_CONNECTIONS" in env
    elif lay["tp"] > 1 or lay["cp"] > 1:
        assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in env
    _loaded(ex, plan)


# ---- torchtitan ----------------------------------------------------------------


def _fake_world(world):
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


def _stub_cuda_capability():
    """STUB (named in the module's docstring): the FP8 and MX converters ask
    the GPU's compute capability while they are built."""
    import torchtitan.components.quantization.float8 as f8
    import torchtitan.components.quantization.mx as mx

    f8.has_cuda_capability = lambda *a, **k: True
    mx.has_cuda_capability = lambda *a, **k: True


def _tt_model_shapes(model, args):
    """What the built model is, from its modules (meta tensors: shapes only)."""
    layers = list(model.layers.values())
    first = layers[0]
    att = first.attention
    out = {"layers": len(layers), "d_model": model.tok_embeddings.weight.shape[1],
           "vocab": model.tok_embeddings.weight.shape[0], "heads": args.n_heads,
           "kv_heads": getattr(args, "n_kv_heads", None) or args.n_heads}
    ffn = first.feed_forward if getattr(first, "feed_forward", None) is not None else None
    if ffn is not None:
        out["d_ff"] = ffn.w1.weight.shape[0]
    if hasattr(att, "wq") and hasattr(att.wq, "weight"):
        out["head_dim"] = att.wq.weight.shape[0] // args.n_heads
    experts, moe_layers = 0, []
    for i, blk in enumerate(layers):
        moe = getattr(blk, "moe", None)
        if moe is not None and getattr(blk, "moe_enabled", True):
            moe_layers.append(1)
            experts = moe.experts.w1.shape[0]
            out["moe_d_ff"] = moe.experts.w1.shape[1]
            out["top_k"] = moe.router.top_k
            shared = getattr(moe, "shared_experts", None)
            out["shared_d_ff"] = shared.w1.weight.shape[0] if shared is not None else 0
        else:
            moe_layers.append(0)
            if getattr(blk, "feed_forward", None) is not None:
                out["d_ff"] = blk.feed_forward.w1.weight.shape[0]
    out["experts"] = experts
    out["moe_pattern"] = moe_layers
    if hasattr(args, "kv_lora_rank"):
        out["mla"] = (args.q_lora_rank, args.kv_lora_rank, args.qk_nope_head_dim, args.qk_rope_head_dim,
                      args.v_head_dim)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_torchtitan(name, exports):
    ex = exports[(name, "torchtitan")]
    plan = _plan_or_refusal(ex)
    if plan is None:
        return
    import torch
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import ParallelDims
    from torchtitan.protocols.model_converter import build_model_converters
    from torchtitan.protocols.train_spec import get_train_spec

    lay, m = plan["layout"], plan["model"]
    job = ConfigManager().parse_args(["--job.config_file", os.path.join(ex.dir, "job.toml")])
    if job.experimental.custom_import:  # as torchtitan's trainer does, with the export's directory importable
        sys.path.insert(0, ex.dir)
        try:
            importlib.import_module(job.experimental.custom_import)
        finally:
            sys.path.remove(ex.dir)
    p, t = job.parallelism, job.training
    _fake_world(lay["world"])
    dims = ParallelDims(dp_replicate=p.data_parallel_replicate_degree, dp_shard=p.data_parallel_shard_degree,
                        cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                        ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=lay["world"])
    dims.build_mesh()
    assert (dims.tp, dims.cp, dims.pp) == (lay["tp"], lay["cp"], lay["pp"])
    assert dims.dp_replicate * dims.dp_shard == lay["dp"]
    sharded = dims.dp_shard > 1
    zero = lay["zero"] if lay["dp"] > 1 else "none"
    assert sharded == (zero in ("3", "fsdp"))
    if sharded or dims.cp > 1:
        assert p.fsdp_reshard_after_forward == ("never" if zero == "fsdp" else "always")
    assert (dims.ep, dims.etp) == (lay["ep"], lay["etp"])
    if lay["ep"] > 1:
        assert p.expert_parallel_comm_backend == ("deepep" if lay["dispatcher"] == "flex" else "standard")
    # the model: the flavor from the registry, built on the meta device
    spec = get_train_spec(job.model.name)
    assert job.model.flavor in spec.model_args, f"{job.model.name} has no flavor {job.model.flavor}"
    args = spec.model_args[job.model.flavor]
    args.update_from_config(job)
    with torch.device("meta"):
        model = spec.model_cls(args)
    got = _tt_model_shapes(model, args)
    assert (got["layers"], got["d_model"], got["vocab"], got["heads"]) == \
        (m["layers"], m["d_model"], m["vocab"], m["heads"])
    if not m["kv_lora_rank"]:
        assert got["kv_heads"] == m["kv_heads"]
        assert got["head_dim"] == m["head_dim"]
    else:
        assert got["mla"] == (m["q_lora_rank"], m["kv_lora_rank"], m["qk_nope_dim"], m["qk_rope_dim"],
                              m["v_head_dim"])
    if "d_ff" in got:
        assert got["d_ff"] == m["d_ff"]
    assert got["experts"] == m["experts"]
    if m["experts"]:
        assert (got["top_k"], got["moe_d_ff"], got["shared_d_ff"]) == (m["top_k"], m["moe_d_ff"], m["shared_d_ff"])
        assert got["moe_pattern"] == _moe_pattern(m)
    # the batch: torchtitan accumulates global / (local x dp) local batches, a pipeline splits each in micro-batches
    assert (t.global_batch_size, t.seq_len) == (lay["global_batch"], m["seq_len"])
    accum = t.global_batch_size // (t.local_batch_size * lay["dp"])
    assert accum * t.local_batch_size * lay["dp"] == t.global_batch_size
    if dims.pp > 1:
        assert accum == 1, "one schedule runs all the micro-batches"
        assert p.pipeline_parallel_microbatch_size == lay["micro_batch"]
        assert t.local_batch_size // p.pipeline_parallel_microbatch_size == lay["micro_batches"]
    else:
        assert t.local_batch_size == lay["micro_batch"]
        assert accum == lay["micro_batches"]
    # the pipeline: the schedule class, the chunks, stages per rank as torchtitan's pipeline_llm requires
    if dims.pp > 1:
        cls = get_schedule_class(p.pipeline_parallel_schedule)
        want = {"1f1b": "Schedule1F1B", "interleaved": "ScheduleInterleaved1F1B", "zb-v": "ScheduleZBVZeroBubble",
                "dualpipev": "ScheduleDualPipeV"}[lay["sched"]]
        assert cls.__name__ == want, f"{p.pipeline_parallel_schedule} is {cls.__name__}, the plan runs {want}"
        parts = p.module_fqns_per_model_part
        per_rank = len(parts) // dims.pp
        assert len(parts) == dims.pp * per_rank == lay["pp"] * lay["vp"]
        assert per_rank == 1 if issubclass(cls, PipelineScheduleSingle) else per_rank >= 2
        names = [n for part in parts for n in part]
        expect = ["tok_embeddings"] + [f"layers.{i}" for i in range(m["layers"])] + ["norm", "output"]
        assert names == expect, "every module once, in model order"
        chunks = [sum(1 for n in part if n.startswith("layers.")) for part in parts]
        assert chunks == plan["chunk_layers"]
    # recompute, precision and the FP8 converters
    assert job.activation_checkpoint.mode == {"none": "none", "full": "full"}[lay["recompute"]]
    assert t.mixed_precision_param == ("float32" if lay["precision"] == "fp32" else "bfloat16")
    _stub_cuda_capability()
    conv = build_model_converters(job, dims)
    kinds = [type(c).__name__ for c in conv.converters]
    if lay["precision"] == "fp8":
        if lay["fp8"] == "tensorwise":
            from torchao.float8.config import ScalingGranularity, ScalingType

            assert kinds == ["Float8LinearConverter"]
            cc = conv.converters[0].config.cast_config_input
            assert (cc.scaling_type, cc.scaling_granularity) == (ScalingType.DYNAMIC, ScalingGranularity.TENSORWISE)
        else:
            assert lay["fp8"] == "mxfp8" and kinds == ["MXLinearConverter"]
            assert conv.converters[0].config.block_size == 32
        assert "output" in conv.converters[0].filter_fqns, "the head stays bf16, as simulated"
    else:
        assert kinds == []
    _loaded(ex, plan)


# ---- DeepSpeed ----------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_deepspeed(name, exports):
    ex = exports[(name, "deepspeed")]
    plan = _plan_or_refusal(ex)
    if plan is None:
        return
    import inspect

    import deepspeed
    import torch
    from deepspeed.moe.layer import MoE
    from deepspeed.pipe import LayerSpec
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.pipe.topology import PipeDataParallelTopology, PipelineParallelGrid

    lay, m = plan["layout"], plan["model"]
    assert (lay["tp"], lay["cp"], lay["vp"]) == (1, 1, 1)
    _fake_world(lay["world"])
    deepspeed.init_distributed(dist_backend="fake")
    mpu, pm = None, None
    if lay["pp"] > 1:
        spec = importlib.util.spec_from_file_location(f"pipeline_{name}", os.path.join(ex.dir, "pipeline.py"))
        pipeline = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(pipeline)
        layers = [LayerSpec(torch.nn.Identity) for _ in range(m["layers"] + 2)]
        pm = pipeline.build(layers)
        mpu = pm.mpu()
        assert pm.num_stages == lay["pp"]
        assert mpu.get_data_parallel_world_size() == lay["dp"]
        stages = [pm.parts[s + 1] - pm.parts[s] - (s == 0) - (s == lay["pp"] - 1) for s in range(lay["pp"])]
        assert stages == plan["stage_layers"], "DeepSpeed's stages hold the planned layers"
        assert (pm._local_start, pm._local_stop) == (pm.parts[0], pm.parts[1]), "rank 0 builds stage 0"
        assert pm.activation_checkpoint_interval == (1 if lay["recompute"] == "full" else 0)
        with open(os.path.join(ex.dir, "partition.json")) as f:
            part = json.load(f)
        if part["same_as_partition_method"] == "uniform":  # then DeepSpeed's own method gives the same
            from deepspeed.runtime import utils as ds_utils

            assert ds_utils.partition_uniform(num_items=m["layers"] + 2, num_parts=lay["pp"]) == pm.parts
        if m["experts"]:
            moe = part["moe"]
            sig = inspect.signature(MoE.__init__).parameters
            assert {"num_experts", "ep_size", "k"} <= set(sig), "deepspeed.moe.layer.MoE's argument names"
            assert (moe["num_experts"], moe["ep_size"], moe["k"]) == (m["experts"], lay["ep"], m["top_k"])
            assert [int(i in moe["moe_layers"]) for i in range(m["layers"])] == _moe_pattern(m)
    else:
        topo = PipeDataParallelTopology(num_pp=1, num_dp=lay["dp"])
        mpu = PipelineParallelGrid(topology=topo)
    cfg = DeepSpeedConfig(os.path.join(ex.dir, "ds_config.json"), mpu=mpu)
    assert cfg.train_batch_size == lay["global_batch"]
    assert cfg.train_micro_batch_size_per_gpu == lay["micro_batch"]
    assert cfg.gradient_accumulation_steps == lay["micro_batches"]
    assert cfg.bfloat16_config.enabled == (lay["precision"] == "bf16")
    assert cfg.float16_config.enabled == (lay["precision"] == "fp16")
    zero = lay["zero"] if lay["dp"] > 1 else "none"
    assert cfg.zero_optimization_stage == {"none": 0, "1": 1, "2": 2, "3": 3}[zero]
    if lay["pp"] > 1:
        assert cfg.zero_optimization_stage < 2, "DeepSpeed's pipeline engine asserts ZeRO 0 or 1"
    assert lay["sched"] == "1f1b", "DeepSpeed's pipeline engine runs one 1F1B schedule"
    _loaded(ex, plan)
