#!/usr/bin/env python3
"""A PyTorch DDP script written for torchrun, run unchanged by Starling's
elastic command jobs (peers/examples/elastic-torch.json, docs/elastic.md
"Command jobs").

An MLP (784-256-128-10, ReLU) on Fashion-MNIST (Debian's
dataset-fashion-mnist, read with bench/train/torch_train.py's IDX loader),
trained with DistributedDataParallel over gloo. The process group comes
from torchrun's environment (init_process_group("gloo"), env://: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT); without WORLD_SIZE the script
trains alone.

  * Batches: --batch is the global batch (samples per step, all ranks
    together). Every rank draws the same permutation of the epoch (from
    --seed and the epoch) and takes its share of each global batch, so a
    step is the same whatever the world's size (the loss is scaled so that
    DDP's average of the ranks' gradients is the global batch's mean).
    No DistributedSampler.
  * Checkpoints: every --checkpoint-every steps rank 0 writes
    ckpt-STEP.pt into the checkpoint directory (--checkpoint-dir, else
    $STARLING_CHECKPOINT_DIR, else ./ckpt): a temporary file, fsync,
    rename, then the older ones are removed. On start rank 0 loads the
    newest and sends it to the others, so the world resumes where the last
    checkpoint left it, mid-epoch included.
  * SIGTERM (torchrun's agent or Starling stopping a world): the ranks
    agree on it at the next step (a one-integer all-reduce per step), rank
    0 checkpoints that step, and all exit 0.

Output (rank 0): "step S loss L" every --log-every steps (L: the global
batch's mean loss), "test_acc A" at the end; and the same as the JSON
lines a Starling peer reads from rank 0 (docs/elastic.md, "Command jobs":
the job's progress and its epoch metrics): {"step": S, "loss": L,
"epoch": E} beside each step line, {"epoch": E, "test_acc": A} at the end.

    /usr/bin/python3 peers/examples/torch_ddp_train.py --epochs 1 --limit 6000
    torchrun --nnodes 1 --nproc_per_node 2 peers/examples/torch_ddp_train.py --epochs 1

(Debian's torchrun, torch 1.13 on Python 3.11, fails at its default
--redirects 0 (Std.from_str finds no member 0): add --redirects 2 --tee 1
--log_dir DIR.) The same global batch gives the same losses with 1 or 2
ranks.

The command-line options --epochs, --batch, --lr, --checkpoint-every,
--limit and --seed are kept stable (bench/elastic uses them).
"""
import argparse
import glob
import importlib.util
import json
import os
import re
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
LOADER = os.path.join(HERE, "..", "..", "bench", "train", "torch_train.py")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--epochs", type=int, default=3, help="epochs to train (default 3)")
ap.add_argument("--batch", type=int, default=192,
                help="global batch: samples per step, all ranks together (default 192)")
ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
ap.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
ap.add_argument("--checkpoint-every", type=int, default=100,
                help="steps between checkpoints (default 100; 0: none but the stop's)")
ap.add_argument("--checkpoint-dir", default=None,
                help="default $STARLING_CHECKPOINT_DIR, else ./ckpt")
ap.add_argument("--limit", type=int, default=0, help="training samples (default 0: all 60000)")
ap.add_argument("--seed", type=int, default=1, help="initialisation and epoch orders (default 1)")
ap.add_argument("--log-every", type=int, default=50, help="steps between loss lines (default 50)")
ap.add_argument("--threads", type=int, default=0, help="torch threads (default 0: torch's)")
ap.add_argument("--data-dir", default=None, help="IDX files (default Debian's fashion-mnist)")
a = ap.parse_args()

stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def load_loader():
    """bench/train/torch_train.py's IDX reader, imported by path (this
    directory has a torch_train.py of its own)."""
    spec = importlib.util.spec_from_file_location("bench_torch_train", LOADER)
    if spec is None or not os.path.exists(LOADER):
        sys.exit(f"torch_ddp_train.py: cannot find the data loader {LOADER}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def newest_checkpoint(ckdir):
    best, best_step = None, -1
    for path in glob.glob(os.path.join(ckdir, "ckpt-*.pt")):
        m = re.fullmatch(r"ckpt-(\d+)\.pt", os.path.basename(path))
        if m and int(m.group(1)) > best_step:
            best, best_step = path, int(m.group(1))
    return best


def save_checkpoint(ckdir, state):
    """Atomically: a temporary file, fsync, rename, fsync of the directory;
    then the older checkpoints go (the node replicates the directory)."""
    os.makedirs(ckdir, exist_ok=True)
    name = f"ckpt-{state['step']:09d}.pt"
    path, tmp = os.path.join(ckdir, name), os.path.join(ckdir, name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(ckdir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for old in glob.glob(os.path.join(ckdir, "ckpt-*.pt")):
        if os.path.basename(old) != name:
            os.remove(old)


def report(**fields):
    """One JSON line that the peer running rank 0 reads into the job's
    records: {"step", "loss", "epoch"} is progress, {"epoch", "test_acc"}
    an epoch's metrics. starling.elastic.report_step and report_epoch write
    the same lines; this script prints its own so that it runs with
    Debian's python3 and no starling package installed."""
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def main():
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.batch < world:
        sys.exit(f"torch_ddp_train.py: --batch {a.batch} is smaller than the world ({world} ranks)")
    ckdir = a.checkpoint_dir or os.environ.get("STARLING_CHECKPOINT_DIR") or "./ckpt"

    bench = load_loader()
    xtr, ytr, xte, yte, _ = bench.load(a.data_dir or bench.DATA_DIR, a.limit)
    xtr = torch.from_numpy(xtr.reshape(len(xtr), -1).astype("float32") / 255.0)
    ytr = torch.from_numpy(ytr.astype("int64"))
    xte = torch.from_numpy(xte.reshape(len(xte), -1).astype("float32") / 255.0)
    yte = torch.from_numpy(yte.astype("int64"))

    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    # resume: rank 0's newest checkpoint, sent to every rank
    state = [None]
    if rank == 0:
        path = newest_checkpoint(ckdir)
        if path:
            state[0] = torch.load(path)
    if distributed:
        dist.broadcast_object_list(state, src=0)
    step = 0
    if state[0] is not None:
        model.load_state_dict(state[0]["model"])
        opt.load_state_dict(state[0]["opt"])
        step = state[0]["step"]
        if state[0].get("batch") != a.batch:
            print(f"warning: the checkpoint was trained with --batch {state[0].get('batch')}, "
                  f"not {a.batch}", flush=True)
    print(f"rank {rank} of {world}: " + (f"resumed at step {step}" if step else "starting"),
          flush=True)
    ddp = nn.parallel.DistributedDataParallel(model) if distributed else model

    per_epoch = len(xtr) // a.batch
    if per_epoch == 0:
        sys.exit(f"torch_ddp_train.py: {len(xtr)} samples make no batch of {a.batch}")
    # this rank's share of a global batch: the first (batch % world) ranks take one more
    share, extra = divmod(a.batch, world)
    lo = rank * share + min(rank, extra)
    hi = lo + share + (1 if rank < extra else 0)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    flag = torch.zeros(1)

    def checkpoint():
        if rank == 0:
            save_checkpoint(ckdir, {"model": model.state_dict(), "opt": opt.state_dict(),
                                    "step": step, "batch": a.batch, "seed": a.seed})

    total = a.epochs * per_epoch
    stopped = False
    perm_epoch = -1
    while step < total:
        epoch, i = divmod(step, per_epoch)
        if perm_epoch != epoch:
            gen = torch.Generator().manual_seed(a.seed * 1000003 + epoch)
            perm, perm_epoch = torch.randperm(len(xtr), generator=gen), epoch
        # every rank learns of a SIGTERM at the same step
        flag[0] = 1.0 if stop else 0.0
        if distributed:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag[0] > 0:
            stopped = True
            break
        idx = perm[i * a.batch + lo:i * a.batch + hi]
        opt.zero_grad()
        # sum / global batch, times the world: DDP averages over the ranks
        loss = loss_fn(ddp(xtr[idx]), ytr[idx]) * (world / a.batch)
        loss.backward()
        opt.step()
        step += 1
        if step % a.log_every == 0 or step == total:
            shown = loss.detach() / world
            if distributed:
                dist.all_reduce(shown)
            if rank == 0:
                print(f"step {step} loss {shown.item():.4f}", flush=True)
                report(step=step, loss=round(shown.item(), 4), epoch=(step - 1) // per_epoch + 1)
        if a.checkpoint_every and step % a.checkpoint_every == 0:
            checkpoint()

    if stopped:
        checkpoint()
        if rank == 0:
            print(f"stopped by SIGTERM at step {step}", flush=True)
    else:
        if not (a.checkpoint_every and step % a.checkpoint_every == 0):
            checkpoint()  # the end, unless the last step's checkpoint was it
        # the test set, shared out by rank
        model.eval()
        n = len(xte)
        tlo, thi = rank * n // world, (rank + 1) * n // world
        with torch.no_grad():
            correct = (model(xte[tlo:thi]).argmax(1) == yte[tlo:thi]).sum().float().reshape(1)
        if distributed:
            dist.all_reduce(correct)
        if rank == 0:
            print(f"test_acc {correct.item() / n:.4f}", flush=True)
            report(epoch=a.epochs, test_acc=round(correct.item() / n, 4))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
