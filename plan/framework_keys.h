/*
 * framework_keys.h: the names the exports write, one table per framework
 * at the version the exports target (plan_framework.h pins the versions).
 * The writers (export_megatron.c, export_torchtitan.c, export_deepspeed.c)
 * never spell a framework's key themselves: they ask this table, so that
 * when a framework renames a key one table changes, and the parsers' check
 * (tests/plan/test_framework_parsers.py) fails until it does.
 *
 *   megatron    Megatron-LM's command-line flags (megatron/training/
 *               arguments.py at the pinned commit) and the values they take
 *   torchtitan  torchtitan's JobConfig TOML: section and key
 *               (torchtitan/config/job_config.py), schedule, converter and
 *               recipe names
 *   deepspeed   DeepSpeed's config keys (deepspeed/runtime/config.py) and
 *               deepspeed.pipe.PipelineModule's argument names
 */
#ifndef PLACER_PLAN_FRAMEWORK_KEYS_H
#define PLACER_PLAN_FRAMEWORK_KEYS_H

typedef enum {
    /* the model */
    MK_NUM_LAYERS = 0, MK_HIDDEN_SIZE, MK_FFN_HIDDEN_SIZE, MK_NUM_ATTENTION_HEADS, MK_GROUP_QUERY_ATTENTION,
    MK_NUM_QUERY_GROUPS, MK_KV_CHANNELS, MK_SEQ_LENGTH, MK_MAX_POSITION_EMBEDDINGS, MK_NORMALIZATION,
    MK_NORM_EPSILON, MK_SWIGLU, MK_SQUARED_RELU, MK_POSITION_EMBEDDING_TYPE, MK_ROTARY_BASE,
    MK_DISABLE_BIAS_LINEAR, MK_ADD_QKV_BIAS, MK_UNTIE_EMBEDDINGS, MK_QK_LAYERNORM, MK_MAKE_VOCAB_DIVISIBLE_BY,
    /* multi-head latent attention */
    MK_MULTI_LATENT_ATTENTION, MK_Q_LORA_RANK, MK_KV_LORA_RANK, MK_QK_HEAD_DIM, MK_QK_POS_EMB_HEAD_DIM,
    MK_V_HEAD_DIM,
    /* mixture of experts */
    MK_NUM_EXPERTS, MK_MOE_ROUTER_TOPK, MK_MOE_FFN_HIDDEN_SIZE, MK_MOE_SHARED_EXPERT_SIZE, MK_MOE_LAYER_FREQ,
    MK_MOE_ROUTER_SCORE_FUNCTION, MK_MOE_ROUTER_EXPERT_BIAS, MK_MOE_ROUTER_NUM_GROUPS, MK_MOE_ROUTER_GROUP_TOPK,
    MK_MOE_ROUTER_TOPK_SCALING, MK_EXPERT_MODEL_PARALLEL_SIZE, MK_EXPERT_TENSOR_PARALLEL_SIZE,
    MK_MOE_TOKEN_DISPATCHER_TYPE, MK_MOE_FLEX_DISPATCHER_BACKEND, MK_MOE_GROUPED_GEMM,
    /* the layout */
    MK_TENSOR_MODEL_PARALLEL_SIZE, MK_PIPELINE_MODEL_PARALLEL_SIZE, MK_CONTEXT_PARALLEL_SIZE,
    MK_SEQUENCE_PARALLEL, MK_LAYERS_PER_VIRTUAL_STAGE, MK_FIRST_STAGE_LAYERS, MK_LAST_STAGE_LAYERS,
    MK_PIPELINE_LAYOUT, MK_RECOMPUTE_GRANULARITY, MK_RECOMPUTE_METHOD, MK_RECOMPUTE_NUM_LAYERS,
    MK_USE_DISTRIBUTED_OPTIMIZER, MK_USE_TORCH_FSDP2, MK_NO_GRAD_ACC_FUSION, MK_BF16, MK_FP16,
    MK_FP8_FORMAT, MK_FP8_RECIPE, MK_MICRO_BATCH_SIZE, MK_GLOBAL_BATCH_SIZE,
    /* values */
    MK_V_RMSNORM, MK_V_LAYERNORM, MK_V_ROPE, MK_V_LEARNED, MK_V_FULL, MK_V_SELECTIVE, MK_V_UNIFORM,
    MK_V_HYBRID, MK_V_E4M3, MK_V_SIGMOID, MK_V_SOFTMAX, MK_V_ALLTOALL, MK_V_ALLGATHER, MK_V_FLEX, MK_V_DEEPEP,
    /* the environment */
    MK_ENV_MAX_CONNECTIONS,
    MK_COUNT
} megatron_key;

typedef enum {
    TK_JOB = 0, TK_JOB_DESCRIPTION, TK_JOB_CUSTOM_IMPORT_SECTION, TK_JOB_CUSTOM_IMPORT,
    TK_MODEL, TK_MODEL_NAME, TK_MODEL_FLAVOR, TK_MODEL_CONVERTERS,
    TK_TRAINING, TK_LOCAL_BATCH_SIZE, TK_GLOBAL_BATCH_SIZE, TK_SEQ_LEN, TK_MIXED_PRECISION_PARAM, TK_DTYPE,
    TK_PARALLELISM, TK_DP_REPLICATE, TK_DP_SHARD, TK_FSDP_RESHARD, TK_TP, TK_CP, TK_PP, TK_EP, TK_ETP,
    TK_EP_COMM_BACKEND, TK_PP_SCHEDULE, TK_PP_MODULES, TK_PP_MICROBATCH, TK_PP_EP_OVERLAP,
    TK_AC, TK_AC_MODE,
    TK_FLOAT8_SECTION, TK_FLOAT8_RECIPE, TK_FLOAT8_FILTER, TK_MX_SECTION, TK_MX_RECIPE, TK_MX_FILTER,
    /* values */
    TK_V_SCHED_1F1B, TK_V_SCHED_INTERLEAVED, TK_V_SCHED_ZBV, TK_V_SCHED_DUALPIPEV, TK_V_RESHARD_ALWAYS,
    TK_V_RESHARD_NEVER, TK_V_AC_NONE, TK_V_AC_FULL, TK_V_BF16, TK_V_FP32, TK_V_CONV_FLOAT8, TK_V_CONV_MX,
    TK_V_TENSORWISE, TK_V_MXFP8, TK_V_STANDARD, TK_V_DEEPEP, TK_V_EMBEDDINGS, TK_V_LAYERS, TK_V_NORM, TK_V_OUTPUT,
    TK_COUNT
} torchtitan_key;

typedef enum {
    DK_TRAIN_BATCH_SIZE = 0, DK_MICRO_BATCH, DK_GRAD_ACCUM, DK_BF16, DK_FP16, DK_ENABLED, DK_ZERO, DK_ZERO_STAGE,
    /* deepspeed.pipe.PipelineModule's arguments, deepspeed.moe.layer.MoE's */
    DK_PM_NUM_STAGES, DK_PM_PARTITION_METHOD, DK_PM_AC_INTERVAL, DK_MOE_NUM_EXPERTS, DK_MOE_EP_SIZE, DK_MOE_K,
    DK_V_UNIFORM,
    DK_COUNT
} deepspeed_key;

/* The name of key k in the pinned version's table (never NULL). */
const char *megatron_key_name(megatron_key k);
const char *torchtitan_key_name(torchtitan_key k);
const char *deepspeed_key_name(deepspeed_key k);

#endif
