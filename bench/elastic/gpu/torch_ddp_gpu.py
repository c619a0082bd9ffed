#!/usr/bin/env python3
"""The anchor of bench/elastic/gpu/run_on_device.sh: PyTorch DDP on the
device's one GPU, W processes (gloo: NCCL refuses two ranks on one
device), the models of bench/train/torch_train.py (MLP 784-256-128-10, CNN
conv5x32-pool-conv5x64-pool-fc), SGD, global batch 256 split across the
ranks, synthetic data already on the GPU (the data path is not measured
on either side). Prints steps/s of rank 0 over --steps after --warmup.

    python3 torch_ddp_gpu.py --model mlp --world 2
"""
import argparse, os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import MLP, CNN  # (copied beside this file in the bundle)


def worker(rank, a, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    dev = torch.device("cuda:0")
    model = (MLP() if a.model == "mlp" else CNN()).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model) if a.world > 1 else model
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    b = a.batch // a.world
    x = torch.randn(b, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (b,), device=dev)
    lossf = torch.nn.CrossEntropyLoss()
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad()
        lossf(ddp(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    if rank == 0:
        q.put(a.steps / (time.perf_counter() - t0))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--port", type=int, default=29731)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, a, a.port, q)) for r in range(a.world)]
    for p in ps:
        p.start()
    rate = q.get(timeout=300)
    for p in ps:
        p.join()
    print("torch %s DDP gloo world %d: %.1f steps/s" % (a.model, a.world, rate))


if __name__ == "__main__":
    main()
