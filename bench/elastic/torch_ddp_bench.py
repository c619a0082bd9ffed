#!/usr/bin/env python3
"""A DDP trainer written for torchrun, the anchor's worker in
bench/elastic/recovery.py (and the command of its Starling command job).

Trains bench/train/torch_train.py's MLP (784-256-128-10, Starling's
mlp:256,128) or CNN (cnn:32,64) on Fashion-MNIST with DistributedDataParallel
on gloo, CPU. It reads torchrun's environment (RANK, WORLD_SIZE,
MASTER_ADDR/MASTER_PORT through env://, TORCHELASTIC_RESTART_COUNT) and
keeps a checkpoint, as a torchrun user must to survive a restart:

* the global batch (--global-batch) is split across the ranks; step s of
  epoch e takes samples [s*B, (s+1)*B) of that epoch's permutation (seeded
  by the epoch), rank r the r-th slice, so the world size does not change
  what is trained;
* rank 0 writes model, optimizer and step to CKPT/ckpt.pt every
  --checkpoint-every steps (tmp file + rename); every worker resumes from
  it at start. CKPT is $STARLING_CHECKPOINT_DIR when set (Starling's
  command jobs), else --ckpt-dir.

It prints, flushed, on stdout and (with --step-log DIR) into
DIR/<node>-<pid>.log, one line per event, wall_ms = Unix time in ms:

    START node=N pid=P rank=R world=W restart=C start_step=S wall_ms=T
    STEP node=N rank=R world=W restart=C step=S wall_ms=T cpu_ms=U

(U: the process's CPU time so far, every thread) where S in STEP is the number of steps done (the first step after a
resume from step C prints C+1) and N is $BENCH_NODE (the harness sets it
per torchrun agent or peer), else the hostname. --steps bounds the run
(0: until killed). --step-every prints every k-th STEP only (0: none but
the first of a run, for steps/s runs that report --report-every instead).
"""
import argparse
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from torch_train import CNN, MLP, DATA_DIR, init_like_starling, load  # noqa: E402


def now_ms():
    return int(time.time() * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--checkpoint-every", type=int, default=200)
    ap.add_argument("--ckpt-dir", default="")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: never)")
    ap.add_argument("--step-log", default="", help="also write the event lines into DIR/<node>-<pid>.log")
    ap.add_argument("--step-every", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA_DIR)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    node = os.environ.get("BENCH_NODE") or socket.gethostname()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    logf = None
    if a.step_log:
        os.makedirs(a.step_log, exist_ok=True)
        logf = open(os.path.join(a.step_log, f"{node}-{os.getpid()}.log"), "a", buffering=1)

    def emit(line):
        print(line, flush=True)
        if logf:
            logf.write(line + "\n")

    dist.init_process_group("gloo")  # env://: torchrun's MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()

    xtr, ytr, _, _, _ = load(a.data, 0)
    X = torch.from_numpy(xtr.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    Y = torch.from_numpy(ytr.astype(np.int64))
    n = X.shape[0]
    steps_per_epoch = n // a.global_batch

    torch.manual_seed(a.seed)
    model = MLP() if a.model == "mlp" else CNN()
    init_like_starling(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    ckdir = os.environ.get("STARLING_CHECKPOINT_DIR") or a.ckpt_dir
    ckpt = os.path.join(ckdir, "ckpt.pt") if ckdir else ""
    step = 0
    if ckpt and os.path.exists(ckpt):
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
    ddp = DDP(model)
    emit(f"START node={node} pid={os.getpid()} rank={rank} world={world} restart={restart} "
         f"start_step={step} wall_ms={now_ms()}")

    # this rank's slice of the global batch (the first ranks take the remainder)
    per, extra = divmod(a.global_batch, world)
    lo = rank * per + min(rank, extra)
    hi = lo + per + (1 if rank < extra else 0)
    perm_epoch, perm = -1, None
    first = True
    while a.steps == 0 or step < a.steps:
        epoch, s = divmod(step, steps_per_epoch)
        if epoch != perm_epoch:
            perm = torch.randperm(n, generator=torch.Generator().manual_seed(a.seed * 1000 + epoch))
            perm_epoch = epoch
        idx = perm[s * a.global_batch + lo: s * a.global_batch + hi]
        opt.zero_grad()
        # DDP averages over ranks; weight by the slice so unequal slices
        # still give the mean over the global batch
        loss = F.cross_entropy(ddp(X[idx]), Y[idx]) * (len(idx) * world / a.global_batch)
        loss.backward()
        opt.step()
        step += 1
        if first or (a.step_every and step % a.step_every == 0):
            emit(f"STEP node={node} rank={rank} world={world} restart={restart} step={step} "
                 f"wall_ms={now_ms()} cpu_ms={int(time.process_time() * 1000)}")
            first = False
        if rank == 0 and step % 10 == 0:
            # the progress line a Starling peer reads from rank 0 (docs/elastic.md "Progress")
            print(json.dumps({"step": step, "loss": round(loss.item(), 5)}), flush=True)
        if ckpt and rank == 0 and step % a.checkpoint_every == 0:
            tmp = ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
            os.replace(tmp, ckpt)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
