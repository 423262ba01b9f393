"""flash_sdpa.py: PyTorch's causal scaled_dot_product_attention in bf16 on the
shapes flash_tests bench times, under the same protocol (10 warm-up calls,
then the median of 50, one CUDA event pair per call), for comparison with
the engine's kernels (hw/kernels/flash_attention.cu).

Two inputs per shape: "layout", q/k/v as views of one (B, T, 3C) tensor and
the output made (B, T, C) contiguous, which is what the engine's kernels
take and give; and "contig", contiguous (B, NH, T, hs) q/k/v and output left
as SDPA returns it (SDPA alone). The forward is a training forward (autograd
on); backward is one autograd backward over the retained graph; fwd+bwd both
in one timed region. Each is timed as single calls and as 20 calls back to
back per sample (flash_tests does the same), and as the sum of its CUDA
kernels' durations under torch.profiler (the GPU's own time, without
PyTorch's host overhead, which dominates the event timings at these sizes). Each backend
PyTorch has (default choice, flash, cuDNN, memory-efficient) is tried;
a backend that refuses the inputs is reported as such.

usage: python3 tests/gpu/flash_sdpa.py        (prints SDPA lines and a table)
"""
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [("gpt", 16, 256, 384, 6), ("gpt", 8, 256, 384, 6), ("gpt", 4, 256, 384, 6),
          ("gpt", 2, 256, 384, 6), ("gpt", 1, 256, 384, 6), ("gpt12", 16, 256, 768, 12)]
BACKENDS = [("default", None), ("flash", SDPBackend.FLASH_ATTENTION),
            ("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def median_ms(fn, warm=10, iters=50, reps=1):
    """Median over iters samples of reps back-to-back calls (per call)."""
    times = []
    for i in range(warm + iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        if i >= warm:
            times.append(e0.elapsed_time(e1) / reps)
    return statistics.median(times)


def kernel_us(fn, iters=20):
    """GPU kernel time per call: the sum of the CUDA kernels' durations that
    torch.profiler records over iters calls (no launch gaps, no host time),
    divided by iters. The host-bound event timings above include PyTorch's
    per-op CPU overhead (autograd, views); this is what the GPU itself spent."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    total = sum(getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
                for e in prof.key_averages())  # microseconds
    return total / iters / 1e3  # ms, as median_ms


def time_shape(B, T, C, NH, layout):
    hs = C // NH
    g = torch.Generator(device="cuda").manual_seed(0)
    if layout:
        qkv = torch.randn(B, T, 3 * C, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
        dout = torch.randn(B, T, C, device="cuda", dtype=torch.bfloat16, generator=g)

        def fwd():
            q, k, v = qkv.split(C, dim=2)
            q, k, v = (x.view(B, T, NH, hs).transpose(1, 2) for x in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).contiguous().view(B, T, C)
    else:
        q, k, v = (torch.randn(B, NH, T, hs, device="cuda", dtype=torch.bfloat16, generator=g,
                               requires_grad=True) for _ in range(3))
        dout = torch.randn(B, NH, T, hs, device="cuda", dtype=torch.bfloat16, generator=g)

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    y = fwd()  # a training forward (autograd on), as the engine's
    bwd = lambda: y.backward(dout, retain_graph=True)
    both = lambda: fwd().backward(dout)
    single = [median_ms(f) for f in (fwd, bwd, both)]
    b2b = [median_ms(f, 3, 30, 20) for f in (fwd, bwd, both)]
    kern = [kernel_us(f) for f in (fwd, bwd, both)]
    return single + b2b + kern


def main():
    torch.backends.cuda.matmul.allow_tf32 = True
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    print("single call: median of 50 after 10 warm-up; b2b: 20 calls back to back per sample, median of 30")
    print(f"{'shape':8} {'B':>3} {'T':>4} {'C':>4} {'NH':>3} {'input':7} {'backend':10} "
          f"{'fwd_us':>9} {'bwd_us':>9} {'fwdbwd_us':>10} {'b2b_fwd':>8} {'b2b_bwd':>8} {'b2b_fwdbwd':>10} "
          f"{'kern_fwd':>8} {'kern_bwd':>8} {'kern_fb':>8}")
    for name, B, T, C, NH in SHAPES:
        for layout in (True, False):
            for bname, backend in BACKENDS:
                try:
                    if backend is None:
                        t = time_shape(B, T, C, NH, layout)
                    else:
                        with sdpa_kernel([backend]):
                            t = time_shape(B, T, C, NH, layout)
                except RuntimeError as e:
                    print(f"{name:8} {B:3d} {T:4d} {C:4d} {NH:3d} {'layout' if layout else 'contig':7} "
                          f"{bname:10} refused: {str(e).splitlines()[0][:80]}")
                    continue
                inp = "layout" if layout else "contig"
                print(f"{name:8} {B:3d} {T:4d} {C:4d} {NH:3d} {inp:7} {bname:10} "
                      f"{1e3 * t[0]:9.2f} {1e3 * t[1]:9.2f} {1e3 * t[2]:10.2f} "
                      f"{1e3 * t[3]:8.2f} {1e3 * t[4]:8.2f} {1e3 * t[5]:10.2f} "
                      f"{1e3 * t[6]:8.2f} {1e3 * t[7]:8.2f} {1e3 * t[8]:8.2f}")
                print("SDPA " + json.dumps({"shape": name, "B": B, "T": T, "C": C, "NH": NH, "input": inp,
                                            "backend": bname, "fwd_us": round(1e3 * t[0], 2),
                                            "bwd_us": round(1e3 * t[1], 2),
                                            "fwdbwd_us": round(1e3 * t[2], 2),
                                            "b2b_fwd_us": round(1e3 * t[3], 2),
                                            "b2b_bwd_us": round(1e3 * t[4], 2),
                                            "b2b_fwdbwd_us": round(1e3 * t[5], 2),
                                            "kernel_fwd_us": round(1e3 * t[6], 2),
                                            "kernel_bwd_us": round(1e3 * t[7], 2),
                                            "kernel_fwdbwd_us": round(1e3 * t[8], 2)}), flush=True)


if __name__ == "__main__":
    main()
