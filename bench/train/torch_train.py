#!/usr/bin/env python3
"""PyTorch side of the `train` benchmark (bench/train/run drives it).

Trains the same models as `peerctl train` on Fashion-MNIST, with the same
data (the IDX files of /usr/share/datasets/fashion-mnist, pixels / 255, no
other normalisation), the same batch, optimizer, learning rate and epochs,
and the same initialisation scheme as Starling (He-uniform hidden layers,
Xavier-uniform output layer, zero biases). The minibatch loop indexes
tensors held in memory (no DataLoader, no worker processes): the fastest
way PyTorch can be fed, so the comparison is with PyTorch at its best.

Models (the Starling spec in brackets):
  mlp  784-256-128-10, ReLU                                    [mlp:256,128]
  cnn  conv 5x5x32, ReLU, maxpool 2, conv 5x5x64, ReLU,
       maxpool 2, dense 10                                     [cnn:32,64]

Prints one JSON object per epoch (epoch, train_loss, train_acc, test_loss,
test_acc, seconds = training time of the epoch, eval_seconds,
samples_per_s) and a final one with "summary": true, the peak resident
memory (getrusage, kB), the PyTorch version and its thread settings.
"""
import argparse
import gzip
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """Reads a (gzip) IDX file into a numpy array, checking its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4:
        raise ValueError(f"{path}: truncated header")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data, header says {np.prod(dims)}")
    return body.reshape(dims)


def load(data_dir, limit, normalize=False):
    def pick(stem):
        for name in (stem + "-ubyte.gz", stem + "-ubyte", stem.replace("-idx", ".idx") + "-ubyte.gz"):
            p = os.path.join(data_dir, name)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f"{data_dir}: no {stem}-ubyte[.gz]")

    xtr = read_idx(pick("train-images-idx3"))
    ytr = read_idx(pick("train-labels-idx1"))
    xte = read_idx(pick("t10k-images-idx3"))
    yte = read_idx(pick("t10k-labels-idx1"))
    # Statistics of the whole training set (as Starling's --normalize,
    # before --limit), of the values bytes / 255, from a byte histogram
    # built in slices (a full int or float copy would count in the RSS).
    stats = None
    if normalize:
        flat = xtr.reshape(-1)
        hist = np.zeros(256, dtype=np.float64)
        for i in range(0, flat.size, 1 << 20):
            hist += np.bincount(flat[i:i + (1 << 20)], minlength=256)
        vals = np.arange(256, dtype=np.float64) * np.float64(np.float32(1.0 / 255.0))
        mean = float((hist * vals).sum() / hist.sum())
        stats = (mean, float(np.sqrt((hist * vals * vals).sum() / hist.sum() - mean * mean)))
    if limit:
        xtr, ytr = xtr[:limit], ytr[:limit]
    return xtr, ytr, xte, yte, stats


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.out(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 5)
        self.c2 = nn.Conv2d(32, 64, 5)
        self.out = nn.Linear(64 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.out(x.flatten(1))


def init_like_starling(model):
    """He-uniform for hidden layers, Xavier-uniform for the output, zero bias."""
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for i, m in enumerate(layers):
        if i == len(layers) - 1:
            nn.init.xavier_uniform_(m.weight)
        else:
            nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
        nn.init.zeros_(m.bias)


def scheduled_lr(a, epoch, step, steps):
    """Starling's sl_nn_optim_lr (src/nn/optim.c), per step: linear warm-up
    over `warmup` epochs, then step or cosine decay (epoch counted from 0)."""
    pos = epoch + (step / steps if steps else 0.0)
    if a.warmup > 0 and pos < a.warmup:
        done = epoch * steps + step + 1.0
        return a.lr * done / (a.warmup * (steps or 1))
    if a.schedule == "step":
        return a.lr * a.step_gamma ** (epoch // max(1, a.step_epochs))
    if a.schedule == "cosine":
        span = a.epochs - a.warmup
        t = min(1.0, (pos - a.warmup) / span) if span > 0 else 1.0
        return a.lr * 0.5 * (1.0 + math.cos(math.pi * t))
    return a.lr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--optimizer", choices=["sgd", "nesterov", "adam", "adamw"], default="sgd")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0,
                    help="L2 (sgd, nesterov, adam) or decoupled (adamw), as Starling")
    ap.add_argument("--schedule", choices=["none", "step", "cosine"], default="none")
    ap.add_argument("--step-epochs", type=int, default=10)
    ap.add_argument("--step-gamma", type=float, default=0.1)
    ap.add_argument("--warmup", type=float, default=0.0, help="linear warm-up epochs")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="use the first N training samples")
    ap.add_argument("--normalize", action="store_true",
                    help="standardise with the training set's pixel mean and std (as Starling)")
    ap.add_argument("--data", default=DATA_DIR)
    a = ap.parse_args()

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no cuda device visible to PyTorch"}), flush=True)
        return 3

    xtr, ytr, xte, yte, stats = load(a.data, a.limit, a.normalize)
    # Same scaling as Starling's IDX loader: bytes / 255, or with --normalize
    # bytes * scale + shift with Starling's float32 scale and shift.
    scale, shift = np.float32(1.0 / 255.0), np.float32(0.0)
    if a.normalize:
        mean, std = stats
        scale, shift = np.float32(1.0 / 255.0 / std), np.float32(-mean / std)

    def to_tensor(x):
        v = x.astype(np.float32) * scale + shift if a.normalize else x.astype(np.float32) / 255.0
        return torch.from_numpy(v).reshape(-1, 1, 28, 28).to(dev)

    Xtr, Xte = to_tensor(xtr), to_tensor(xte)
    Ytr = torch.from_numpy(ytr.astype(np.int64)).to(dev)
    Yte = torch.from_numpy(yte.astype(np.int64)).to(dev)
    n = Xtr.shape[0]

    model = (MLP() if a.model == "mlp" else CNN()).to(dev)
    init_like_starling(model)
    wd = a.weight_decay
    if a.optimizer in ("sgd", "nesterov"):
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                              weight_decay=wd, nesterov=a.optimizer == "nesterov")
    elif a.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=wd)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=wd)
    steps = (n + a.batch - 1) // a.batch

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    gen = torch.Generator(device="cpu")
    gen.manual_seed(a.seed)
    for epoch in range(1, a.epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=gen).to(dev)
        loss_sum = torch.zeros((), device=dev)
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        sync()
        t0 = time.perf_counter()
        for step, first in enumerate(range(0, n, a.batch)):
            lr = scheduled_lr(a, epoch - 1, step, steps)
            for group in opt.param_groups:
                group["lr"] = lr
            idx = perm[first:first + a.batch]
            xb, yb = Xtr[idx], Ytr[idx]
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            opt.step()
            with torch.no_grad():
                loss_sum += loss.detach() * yb.shape[0]
                correct += (logits.argmax(1) == yb).sum()
        sync()
        secs = time.perf_counter() - t0
        t1 = time.perf_counter()
        model.eval()
        te_loss = torch.zeros((), device=dev)
        te_correct = torch.zeros((), dtype=torch.int64, device=dev)
        with torch.no_grad():
            for first in range(0, Xte.shape[0], 1000):
                xb, yb = Xte[first:first + 1000], Yte[first:first + 1000]
                logits = model(xb)
                te_loss += F.cross_entropy(logits, yb, reduction="sum")
                te_correct += (logits.argmax(1) == yb).sum()
        sync()
        ev = time.perf_counter() - t1
        print(json.dumps({
            "epoch": epoch, "epochs": a.epochs,
            "train_loss": loss_sum.item() / n, "train_acc": correct.item() / n,
            "test_loss": te_loss.item() / Xte.shape[0],
            "test_acc": te_correct.item() / Xte.shape[0],
            "seconds": secs, "eval_seconds": ev, "samples_per_s": n / secs,
            "device": dev.type,
        }), flush=True)

    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({
        "summary": True, "torch": torch.__version__, "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "peak_rss_kb": ru.ru_maxrss,
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
