#!/usr/bin/env python3
"""Measures the host's time between two training steps of an eager PyTorch loop: the figure behind
the cost model's iteration_host (src/cost/compute_cost.cc).

A training loop synchronises with the device once a step (Megatron-LM's gradient norm, Hugging
Face's check of each loss for NaN, a logged loss): the host then waits for the device, and the
device waits while the host does what comes before the next step's first kernel. This script times
those pieces for a small GPT whose kernels take next to nothing, each on its own, over many steps:
    item       loss.item(), the synchronisation itself
    scheduler  a learning-rate scheduler's step (LambdaLR, warm-up then linear decay)
    zero_grad  optimizer.zero_grad(set_to_none=True)
    batch      next() of a DataLoader over an in-memory dataset of token sequences (workers as
               --workers says; 2 by default, as training scripts prefetch), then .to(device);
               with workers, each next() comes after --step-ms of sleep standing for the step,
               so that they have the batch ready, as in training
and prints each (the median) in microseconds and their sum. With --device cuda the synchronisation waits for the
GPU and the copy goes to it.

    scripts/iteration_overhead.py [--device cpu|cuda] [--steps 2000] [--workers 2] [--step-ms 20]

Needs PyTorch for Python (Debian: apt-get install python3-torch; run it with /usr/bin/python3 where
another python3 comes first on the PATH)."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class TinyGpt(nn.Module):
    def __init__(self, blocks=6, hidden=8, seq=4, vocab=16):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(blocks))
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids, targets):
        x = self.word(ids)
        for block in self.blocks:
            x = x + F.gelu(block(x))
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def median_us(fn, steps):
    for _ in range(steps // 10):
        fn()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(steps // 5):
            fn()
        runs.append((time.perf_counter() - start) / (steps // 5) * 1e6)
    return sorted(runs)[2]


def after_step_us(fn, a):
    """Median time of fn() called after a.step_ms of sleep, over a.steps // 10 calls."""
    times = []
    for _ in range(max(5, a.steps // 10)):
        time.sleep(a.step_ms / 1e3)
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--step-ms", type=float, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = TinyGpt().to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100) * max(0.0, 1 - s / 1e9))
    ids = torch.randint(0, 16, (100000, 5))
    data = TensorDataset(ids[:, :4], ids[:, 1:])
    loader = DataLoader(data, batch_size=8, shuffle=True, num_workers=a.workers,
                        pin_memory=a.device == "cuda", drop_last=True,
                        persistent_workers=a.workers > 0)
    batches = iter(loader)

    def batch():
        nonlocal batches
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        return x.to(a.device, non_blocking=True), y.to(a.device, non_blocking=True)

    x, y = batch()
    loss = model(x, y)
    loss.backward()
    opt.step()
    parts = {
        "item": median_us(lambda: loss.item(), a.steps),
        "scheduler": median_us(sched.step, a.steps),
        "zero_grad": median_us(lambda: opt.zero_grad(set_to_none=True), a.steps),
        "batch": median_us(batch, a.steps) if a.workers == 0 else after_step_us(batch, a),
    }
    print(f"torch {torch.__version__} on {a.device}, {a.workers} loader workers: " +
          ", ".join(f"{k} {v:.1f} us" for k, v in parts.items()) +
          f"; between steps {sum(parts.values()):.1f} us")


if __name__ == "__main__":
    main()
