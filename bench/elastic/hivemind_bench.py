#!/usr/bin/env python3
"""A Hivemind peer for bench/elastic/recovery.py's `hivemind` system: the
same MLP and data as torch_ddp_bench.py, trained with hivemind.Optimizer
over a DHT (Hivemind's quickstart: SGD wrapped by the Optimizer, the
quickstart's matchmaking_time 3 s and averaging_timeout 10 s unless given),
one process per peer, no head node.

Each peer does local steps of --batch samples; once the peers together
have --target-batch samples, they average gradients in a group found over
the DHT and step: one Hivemind epoch, the unit counted here as a step.
A new peer first loads the state from the others (load_state_from_peers).

    python hivemind_bench.py --maddr-out FILE            # the first peer
    python hivemind_bench.py --initial-peers MADDR ...   # the others

Prints, flushed, on stdout and into DIR/<node>-<pid>.log (--step-log) the
same lines as torch_ddp_bench.py: START ... start_step=E wall_ms=T once
the state is loaded, then STEP ... step=E wall_ms=T at every new epoch E,
with world = the peers the optimizer's tracker counts (num_peers).
"""
import argparse
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from torch_train import MLP, DATA_DIR, init_like_starling, load  # noqa: E402


def now_ms():
    return int(time.time() * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--initial-peers", default="")
    ap.add_argument("--maddr-out", default="", help="write this peer's multiaddress here")
    ap.add_argument("--batch", type=int, default=85, help="samples per local step (256/3)")
    ap.add_argument("--target-batch", type=int, default=256, help="samples per Hivemind epoch")
    ap.add_argument("--matchmaking-time", type=float, default=3.0)
    ap.add_argument("--averaging-timeout", type=float, default=10.0)
    ap.add_argument("--step-log", default="")
    ap.add_argument("--run-id", default="bench")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA_DIR)
    a = ap.parse_args()

    import hivemind  # after argparse: --help works without it

    torch.set_num_threads(1)
    node = os.environ.get("BENCH_NODE") or socket.gethostname()
    logf = None
    if a.step_log:
        os.makedirs(a.step_log, exist_ok=True)
        logf = open(os.path.join(a.step_log, f"{node}-{os.getpid()}.log"), "a", buffering=1)

    def emit(line):
        print(line, flush=True)
        if logf:
            logf.write(line + "\n")

    xtr, ytr, _, _, _ = load(a.data, 0)
    X = torch.from_numpy(xtr.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    Y = torch.from_numpy(ytr.astype(np.int64))
    torch.manual_seed(a.seed)
    model = MLP()
    init_like_starling(model)

    peers = [p for p in a.initial_peers.split(",") if p]
    dht = hivemind.DHT(initial_peers=peers, host_maddrs=["/ip4/127.0.0.1/tcp/0"], start=True)
    if a.maddr_out:
        tmp = a.maddr_out + ".tmp"
        with open(tmp, "w") as f:
            f.write(",".join(str(m) for m in dht.get_visible_maddrs()))
        os.replace(tmp, a.maddr_out)
    opt = hivemind.Optimizer(
        dht=dht, run_id=a.run_id, batch_size_per_step=a.batch, target_batch_size=a.target_batch,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        use_local_updates=False, matchmaking_time=a.matchmaking_time,
        averaging_timeout=a.averaging_timeout, verbose=False)
    if peers:
        opt.load_state_from_peers()
    epoch = opt.local_epoch
    emit(f"START node={node} pid={os.getpid()} rank=0 world=0 restart=0 start_step={epoch} "
         f"wall_ms={now_ms()}")
    g = torch.Generator().manual_seed(a.seed * 1000 + os.getpid())
    while True:
        idx = torch.randint(0, X.shape[0], (a.batch,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(X[idx]), Y[idx]).backward()
        opt.step()
        if opt.local_epoch != epoch:
            epoch = opt.local_epoch
            world = opt.tracker.global_progress.num_peers
            emit(f"STEP node={node} rank=0 world={world} restart=0 step={epoch} wall_ms={now_ms()}")


if __name__ == "__main__":
    sys.exit(main())
