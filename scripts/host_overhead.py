#!/usr/bin/env python3
"""Measures the host's time to issue one op of a training pass in eager PyTorch from Python: the
figure behind the cost model's host_forward_op and host_backward_op (src/cost/compute_cost.cc).

GPTs of 2 and 6 blocks of width 8 over 4 tokens (a GPT-2 block as hetplan's op graph describes
it: 15 ops per block), whose kernels take next to nothing, train forward and backward back to
back; the 4 blocks the larger has more, per op of them, are the host's time per op. With --device
cuda the kernels run on the GPU behind the host (one synchronisation per run of passes), so the
same figure is what paces a small model there.

    scripts/host_overhead.py [--device cpu|cuda] [--passes 2000]

Needs PyTorch for Python (Debian: apt-get install python3-torch; run it with /usr/bin/python3 where
another python3 comes first on the PATH). Prints one line per round."""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

OPS_PER_BLOCK = 15  # hetplan's GPT block: norm, qkv, scores, softmax, dropout, context, proj, ...


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.drop = nn.ModuleList(nn.Dropout(0.1) for _ in range(3))
        self.heads = heads

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = (y.view(b, t, self.heads, -1).transpose(1, 2)
                   for y in self.qkv(self.norm1(x)).split(h, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1),
                                    float("-inf"))
        y = (self.drop[0](F.softmax(scores, dim=-1)) @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.drop[1](self.proj(y))
        return x + self.drop[2](self.fc2(F.gelu(self.fc1(self.norm2(x)))))


class Gpt(nn.Module):
    def __init__(self, blocks, hidden=8, heads=2, seq=4, vocab=16):
        super().__init__()
        self.word, self.position = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(blocks))
        self.norm, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids, targets):
        x = self.word(ids) + self.position(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), reduction="sum")


def seconds_per_pass(blocks, backward, device, passes):
    model = Gpt(blocks).to(device)
    ids = torch.randint(0, 16, (1, 4), device=device)
    targets = torch.randint(0, 16, (1, 4), device=device)

    def run(count):
        for _ in range(count):
            loss = model(ids, targets)
            if backward:
                loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()

    run(20)
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        run(passes // 5)
        runs.append((time.perf_counter() - start) / (passes // 5))
    return sorted(runs)[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--passes", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ops = 4 * OPS_PER_BLOCK
    for _ in range(a.rounds):
        f2, f6 = (seconds_per_pass(n, False, a.device, a.passes) for n in (2, 6))
        b2, b6 = (seconds_per_pass(n, True, a.device, a.passes) for n in (2, 6))
        print(f"torch {torch.__version__} on {a.device}: forward {(f6 - f2) / ops * 1e6:.1f} us per op, "
              f"backward {((b6 - f6) - (b2 - f2)) / ops * 1e6:.1f} us per op")


if __name__ == "__main__":
    main()
