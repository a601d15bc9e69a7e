#!/usr/bin/env python3
"""Measures on one CUDA GPU what hetplan's cost model assumes per architecture: BF16 GEMM TFLOP/s by
size, and the attention core fused (scaled_dot_product_attention, flash backend) and plain, forward
and backward. Prints one JSON object (shares of the 16-bit dense peak given with --peak-tflops)."""
import argparse, json, torch, torch.nn.functional as F

def timed(fn, reps=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / reps

ap = argparse.ArgumentParser(); ap.add_argument("--peak-tflops", type=float, required=True)
a = ap.parse_args()
out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "peak_tflops": a.peak_tflops,
       "gemm": [], "attention": []}
for n in (1024, 2048, 4096, 8192, 16384):
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); y = torch.randn_like(x)
    t = timed(lambda: x @ y)
    out["gemm"].append({"n": n, "tflops": 2 * n**3 / t / 1e12, "share_of_peak": 2 * n**3 / t / 1e12 / a.peak_tflops})
for (b, h, s, d) in ((8, 32, 2048, 128), (4, 32, 4096, 128), (16, 16, 1024, 64)):
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    fwd_flops = 4 * b * h * s * s * d / 2  # causal: half the scores
    def fused():
        with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    def plain():
        sc = (q @ k.transpose(-2, -1)) / d**0.5
        sc = sc.masked_fill(torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(sc, -1) @ v
    row = {"batch": b, "heads": h, "seq": s, "head_dim": d}
    for name, fn in (("fused", fused), ("plain", plain)):
        tf = timed(fn)
        go = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        tfb = timed(lambda: fn().backward(go))
        row[name + "_fwd_s"] = tf; row[name + "_fwd_bwd_s"] = tfb
        # Shares on the kernel's own count (causal half) for fused: forward, forward+backward (3.5x).
        row[name + "_fwd_share"] = fwd_flops / tf / 1e12 / a.peak_tflops
        row[name + "_fwd_bwd_share"] = 3.5 * fwd_flops / tfb / 1e12 / a.peak_tflops
    out["attention"].append(row)
print(json.dumps(out, indent=1))
