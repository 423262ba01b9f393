#!/usr/bin/env python3
"""torch._grouped_mm over MoE expert shapes: the kernel torchtitan's MoE
layer (models/moe/moe.py, _run_experts_grouped_mm) and Hugging Face
transformers' default experts implementation ("grouped_mm") call, timed the
way they use it: a SwiGLU expert MLP, h1 = x W1^T, h3 = x W3^T,
out = (silu(h1) * h3) W2^T over E local experts with token offsets.

Same shapes as grouped_gemm_sweep.cu: Mixtral 8x7B (h 4096, f 14336, E 8),
Qwen3-30B-A3B (2048, 768, E 16 and 128), DeepSeek-V3 (7168, 2048, E 8 and
32); m = 16 .. 4096 tokens per expert; "uniform" and "random" (tokens
routed in chunks of 16 to random experts, fixed seed). Per point the forward
alone and forward + backward (inputs and weights need gradients), median of
CUDA-event-timed repetitions after 2 warm-ups; FLOPs: forward 6 T h f
(T = E m tokens), forward + backward 3 times that.

Output lines:
  torch_grouped_mm MODEL E M DIST PASS MS TFLOPS
  python3 grouped_mm_torch.py [--max-m 4096] [--budget-s 40]
"""

import argparse
import sys
import time

MODELS = [("mixtral-8x7b", 4096, 14336, [8]), ("qwen3-30b-a3b", 2048, 768, [16, 128]),
          ("deepseek-v3", 7168, 2048, [8, 32])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-m", type=int, default=4096)
    ap.add_argument("--budget-s", type=float, default=40.0)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("# no GPU", flush=True)
        return 0
    if not hasattr(torch, "_grouped_mm"):
        print("# torch._grouped_mm is missing in this PyTorch", flush=True)
        return 0
    print(f"# torch {torch.__version__} device {torch.cuda.get_device_name(0)}", flush=True)
    print("# torch_grouped_mm MODEL E M DIST PASS MS TFLOPS", flush=True)
    t_end = time.time() + args.budget_s
    dev = "cuda"
    gen = torch.Generator().manual_seed(7)

    def bench(fn, reps_max=20, target_ms=20.0):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(2):
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
        first = e0.elapsed_time(e1)
        reps = max(3, min(reps_max, int(target_ms / max(first, 1e-3)) + 1))
        ts = []
        for _ in range(reps):
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        ts.sort()
        n = len(ts)
        return ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])

    for name, h, f, Es in MODELS:
        for E in Es:
            w1 = (torch.randn(E, f, h, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_()
            w3 = (torch.randn(E, f, h, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_()
            w2 = (torch.randn(E, h, f, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_()
            m = 16
            while m <= args.max_m:
                if time.time() > t_end:
                    print(f"# budget spent at {name} E {E} m {m}", flush=True)
                    return 0
                T = E * m
                for dist in ("uniform", "random"):
                    if dist == "uniform":
                        counts = torch.full((E,), m, dtype=torch.int64)
                    else:
                        pick = torch.randint(0, E, (T // 16,), generator=gen)
                        counts = torch.bincount(pick, minlength=E) * 16
                    offs = torch.cumsum(counts, 0).to(torch.int32).to(dev)
                    x = (torch.randn(T, h, device=dev, dtype=torch.bfloat16)).requires_grad_()
                    gout = torch.randn(T, h, device=dev, dtype=torch.bfloat16)

                    def fwd():
                        h1 = torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)
                        h3 = torch._grouped_mm(x, w3.transpose(-2, -1), offs=offs)
                        return torch._grouped_mm(F.silu(h1) * h3, w2.transpose(-2, -1), offs=offs)

                    def fwd_nograd():
                        with torch.no_grad():
                            fwd()

                    def fwd_bwd():
                        out = fwd()
                        out.backward(gout)
                        x.grad = None
                        w1.grad = w2.grad = w3.grad = None

                    flops = 6.0 * T * h * f
                    for pname, fn, fl in (("fwd", fwd_nograd, flops), ("fwd_bwd", fwd_bwd, 3 * flops)):
                        try:
                            ms = bench(fn)
                            print(f"torch_grouped_mm {name} {E} {m} {dist} {pname} {ms:.4f} "
                                  f"{fl / (ms * 1e-3) / 1e12:.2f}", flush=True)
                        except Exception as exc:  # noqa: BLE001
                            msg = str(exc).split("\n")[0][:160].replace(" ", "_")
                            print(f"torch_grouped_mm {name} {E} {m} {dist} {pname} nan nan {msg}",
                                  flush=True)
                    del x, gout
                m *= 2
            w1 = w2 = w3 = None  # free before the next configuration
            torch.cuda.empty_cache()
    print("# done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
