"""The fixed plans whose exports tests/plan/test_framework_parsers.py loads
in each framework's own parsers (and scripts/check-megatron-lm.py in
Megatron-LM's training script's): dense Llama 3 8B and 405B, DeepSeek-V3,
Mixtral, Qwen3-30B-A3B; FP8 delayed, tensorwise, MXFP8 and blockwise; the
DualPipeV, ZB-V and ZB-H1 orders; interleaving; recompute (full and
selective); FSDP. Each is `placer plan ARGS`, searched for one framework
at a time (--framework F --export F --out DIR)."""

PLANS = [
    ("llama3-8b", "--model llama-3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --seq 8192"),
    ("llama3-405b", "--model llama-3-405b --cluster llama3-h100 --gpus 2048 --global-batch 1024 --seq 8192"),
    ("deepseek-v3", "--model deepseek-v3 --cluster h800-deepseek --gpus 2048 --global-batch 15360 --seq 4096 --top 1"),
    ("mixtral-8x7b", "--model mixtral-8x7b --cluster dgx-h100 --gpus 64 --global-batch 256 --seq 4096"),
    ("qwen3-30b-a3b", "--model qwen3-30b-a3b --cluster dgx-h100 --gpus 64 --global-batch 256 --seq 4096"),
    ("fp8-delayed", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 "
                    "--precision fp8=delayed"),
    ("fp8-tensorwise", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 "
                       "--precision fp8=tensorwise"),
    ("mxfp8", "--model llama-3-70b --cluster dgx-b200 --gpus 128 --global-batch 512 --seq 8192 --precision fp8=mxfp8"),
    ("fp8-blockwise", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 "
                      "--precision fp8=blockwise"),
    ("dualpipev", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 "
                  "--schedules dualpipev --fix pp=8"),
    ("zb-v", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 --schedules zb-v "
             "--fix pp=8"),
    ("zb-h1", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 --schedules zb-h1 "
              "--fix pp=8"),
    ("interleaved", "--model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 --fix pp=4,vp=2"),
    ("recompute-full", "--model llama-3-70b --cluster dgx-h100 --gpus 64 --global-batch 256 --seq 8192 "
                       "--fix recompute=full"),
    ("recompute-selective", "--model llama-3-70b --cluster dgx-h100 --gpus 64 --global-batch 256 --seq 8192 "
                            "--fix recompute=selective"),
    ("fsdp", "--model llama-3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --seq 8192 --fix zero=fsdp"),
]

FRAMEWORKS = ["megatron", "torchtitan", "deepspeed"]
