# SPDX-License-Identifier: MIT
"""A small PyTorch training loop on the GPU for tools/gpu-check: a conv net on random data,
cuBLAS/cuDNN kernels, an optimizer step and a loss read back each step.

  python3 torch_job.py SECONDS
"""
import sys
import time

import torch
from torch import nn


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()


def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")
    for _ in range(5):  # warm-up: cuDNN autotuning, allocator
        train_step(model, opt, x, y)
    torch.cuda.synchronize()
    steps, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < secs:
        loss = train_step(model, opt, x, y)
        steps += 1
        if steps % 50 == 0:
            loss.item()
    torch.cuda.synchronize()
    dt = time.monotonic() - t0
    print(f"steps {steps}")
    print(f"throughput {steps / dt:.2f}")
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
