#!/usr/bin/env python3
"""A PyTorch command trainer for Starling (peers/examples/torch-study.json).

It reports each epoch with ``starling.report`` and checkpoints into
``starling.checkpoint_dir()``: when the trial moves to another peer (its
peer died, or ASHA paused and resumed it), that directory holds the last
replicated checkpoint, and training resumes from it instead of epoch 1.

The data set is synthetic (two interleaved spirals, generated from a fixed
seed) so the example needs nothing but Debian's python3-torch and this
repository's python/ package (PYTHONPATH=python, or pip install ./python).

    python3 peers/examples/torch_train.py --lr 0.01 --hidden 64 --epochs 5

runs it by hand (no peer: it reports to stdout and keeps no checkpoint).
"""
import argparse
import io
import math
import os

import torch
from torch import nn

import starling

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, default=0.01)
ap.add_argument("--hidden", type=int, default=64)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--epochs", type=int, default=10)
ap.add_argument("--batch", type=int, default=64)
a = ap.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


def spirals(n, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * 3 * math.pi + 0.5
    label = torch.randint(0, 2, (n,), generator=g)
    sign = label.float() * 2 - 1
    x = torch.stack([sign * t * torch.cos(t), sign * t * torch.sin(t)], 1) / 10
    return x + 0.03 * torch.randn(n, 2, generator=g), label


x_train, y_train = spirals(4000, 1)
x_val, y_val = spirals(1000, 2)

layers, width = [], 2
for _ in range(a.layers):
    layers += [nn.Linear(width, a.hidden), nn.Tanh()]
    width = a.hidden
model = nn.Sequential(*layers, nn.Linear(width, 2))
opt = torch.optim.Adam(model.parameters(), lr=a.lr)
loss_fn = nn.CrossEntropyLoss()

# resume: the checkpoint the peer restored into checkpoint_dir(), if any
ckdir = starling.checkpoint_dir()
ckpt = os.path.join(ckdir, "model.pt") if ckdir else None
start = 0
if ckpt and os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["epoch"]
    print(f"resuming from epoch {start}", flush=True)  # not JSON: the trial's log

last = min(a.epochs, starling.epochs() or a.epochs)  # the peer's target for this run
for epoch in range(start + 1, last + 1):
    model.train()
    gen = torch.Generator().manual_seed(epoch)  # the same order after a resume
    perm = torch.randperm(len(x_train), generator=gen)
    total = 0.0
    for i in range(0, len(perm), a.batch):
        idx = perm[i:i + a.batch]
        opt.zero_grad()
        loss = loss_fn(model(x_train[idx]), y_train[idx])
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
    model.eval()
    with torch.no_grad():
        out = model(x_val)
        val_loss = loss_fn(out, y_val).item()
        val_acc = (out.argmax(1) == y_val).float().mean().item()
    if ckpt:  # whole files only: write to a .tmp name, then rename (save_file does)
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, buf)
        starling.save_file("model.pt", buf.getvalue())
    starling.report(epoch=epoch, train_loss=total / len(x_train), val_loss=val_loss,
                    val_acc=val_acc)
