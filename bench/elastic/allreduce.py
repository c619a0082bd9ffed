#!/usr/bin/env python3
"""All-reduce bus bandwidth: Starling's ring (its TCP and its ZeroMQ
transport) against torch.distributed.all_reduce on gloo, W processes on
loopback.

    python3 bench/elastic/allreduce.py --build build-ring [--worlds 2,4]
        [--sizes-mib 1,4,16,64] [--runs 3] [--iters 5]
        [--transports tcp,zmq] [--python /usr/bin/python3 ...] [--sweep]

Each run starts W fresh processes per implementation (interleaved:
starling tcp, starling zmq, gloo, ..., the order reversed every other
run). A process does 2 warm-up calls per size, then --iters timed ones; a
call's time is the slowest rank's. The figure of a run is the median call;
the table gives the median of the runs' figures. Bus bandwidth as
nccl-tests define it: algbw = bytes / time, busbw = algbw * 2(W-1)/W.
--transports: the ring's transports to run, one column each
(sl-ring-bench --transport: tcp is what a cluster without a key uses, zmq
the ZeroMQ link a keyed one uses, here without a key). --sweep measures
chunk sizes and windows of the ring instead (16 MiB; --sweep-chunks-kib,
--sweep-windows; the first transport).

Gloo runs under every --python given (one column each) that imports
torch. Default: Debian's python3-torch (/usr/bin/python3) and, if it
exists, a venv with PyPI's current torch at /tmp/venv-torch, made with

    python3 -m venv /tmp/venv-torch
    /tmp/venv-torch/bin/pip install torch
"""
import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import time

GLOO_WORKER = r"""
import os, sys, time, torch, torch.distributed as dist
world, rank, port, sizes, iters, warmup = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
    [int(x) for x in sys.argv[4].split(',')], int(sys.argv[5]), int(sys.argv[6]))
torch.set_num_threads(1)
dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=world)
for mib in sizes:
    t = torch.rand(mib << 20 >> 2)
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        t1 = time.perf_counter()
        if i >= warmup:
            times.append(t1 - t0)
    print(mib << 20, *('%.6f' % x for x in times), flush=True)
dist.destroy_process_group()
"""


def free_base(n):
    """n consecutive free ports below 32768."""
    while True:
        base = random.randrange(20000, 32000 - n)
        ok = True
        for p in range(base, base + n):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            return base


def run_world(cmds, timeout=600):
    """Starts the ranks, returns {size: [slowest rank's time per call]}."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        if p.returncode != 0:
            raise RuntimeError(f"{cmds[0][0]} exited {p.returncode}: {err[-2000:]}")
        outs.append(out)
    per_rank = []
    for out in outs:
        d = {}
        for line in out.split("\n"):
            f = line.split()
            if len(f) >= 2:
                d[int(f[0])] = [float(x) for x in f[1:]]
        per_rank.append(d)
    res = {}
    for size in per_rank[0]:
        calls = zip(*[d[size] for d in per_rank])
        res[size] = [max(c) for c in calls]
    return res


def starling_cmds(a, w, sizes, chunk_kib=0, window=0, exe=None, transport=None):
    exe = exe or os.path.join(a.build, "sl-ring-bench")
    base = free_base(w)
    extra = ["--transport", transport] if transport else []
    return [[exe, "--world", str(w), "--rank", str(r), "--port", str(base),
             "--sizes-mib", ",".join(map(str, sizes)), "--iters", str(a.iters),
             "--warmup", "2", "--chunk-kib", str(chunk_kib), "--window", str(window)] + extra
            for r in range(w)]


def gloo_cmds(a, py, w, sizes):
    port = free_base(1)
    return [[py, "-c", GLOO_WORKER, str(w), str(r), str(port), ",".join(map(str, sizes)),
             str(a.iters), "2"] for r in range(w)]


def busbw(size, t, w):
    return size / t * 2 * (w - 1) / w / 1e9  # GB/s


def torch_version(py):
    try:
        return subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                              capture_output=True, text=True, timeout=120).stdout.strip()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--sizes-mib", default="1,4,16,64")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--python", action="append", default=None)
    ap.add_argument("--transports", default="tcp,zmq",
                    help="the ring's transports, one column each (tcp, zmq)")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--sweep-chunks-kib", default="64,256,1024")
    ap.add_argument("--sweep-windows", default="1,2,4,8,16")
    ap.add_argument("--chunk-kib", type=int, default=0, help="the ring's chunk (0: its default)")
    ap.add_argument("--window", type=int, default=0, help="the ring's window (0: its default)")
    ap.add_argument("--baseline", default="",
                    help="another sl-ring-bench executable (an older build), run interleaved "
                         "as a column of its own, 'starling-base'")
    a = ap.parse_args()
    worlds = [int(x) for x in a.worlds.split(",")]
    sizes = [int(x) for x in a.sizes_mib.split(",")]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}")
    print("# " + " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))

    if a.sweep:
        print("| W | chunk KiB | window | busbw GB/s (median of runs) |")
        print("|---|---|---|---|")
        for w in worlds:
            for ck in map(int, a.sweep_chunks_kib.split(",")):
                for win in map(int, a.sweep_windows.split(",")):
                    figs = []
                    for _ in range(a.runs):
                        r = run_world(starling_cmds(a, w, [16], ck, win,
                                                    transport=a.transports.split(",")[0]))
                        size = 16 << 20
                        figs.append(busbw(size, statistics.median(r[size]), w))
                    print(f"| {w} | {ck} | {win} | {statistics.median(figs):.2f} |", flush=True)
        return

    pys = []
    default_pys = ["/usr/bin/python3"]
    if os.path.exists("/tmp/venv-torch/bin/python"):
        default_pys.append("/tmp/venv-torch/bin/python")
    for py in a.python or default_pys:
        v = torch_version(py)
        if v:
            pys.append((py, v))
        else:
            print(f"# {py}: no torch, skipped")
    transports = [t for t in a.transports.split(",") if t]
    # (column, kind, argument): kind "ring" (argument: the transport),
    # "gloo" (the python), "base" (another sl-ring-bench)
    impls = [(f"starling {t}", "ring", t) for t in transports]
    impls += [(f"gloo {v}", "gloo", py) for py, v in pys]
    if a.baseline:
        impls.append(("starling-base", "base", a.baseline))
    figs = {}  # (impl, w, size) -> [busbw per run]
    loads = {}  # w -> [1-minute load average at the start of each run]
    for run in range(a.runs):
        for w in worlds:
            loads.setdefault(w, []).append(os.getloadavg()[0])
            order = impls if run % 2 == 0 else impls[::-1]
            for name, kind, arg in order:
                if kind == "ring":
                    cmds = starling_cmds(a, w, sizes, a.chunk_kib, a.window, transport=arg)
                elif kind == "base":
                    cmds = starling_cmds(a, w, sizes, a.chunk_kib, a.window, exe=arg)
                else:
                    cmds = gloo_cmds(a, arg, w, sizes)
                res = run_world(cmds)
                for size, times in res.items():
                    figs.setdefault((name, w, size), []).append(busbw(size, statistics.median(times), w))
    # ratios: each transport against every other column
    pairs = [(i, j) for i in range(len(transports)) for j in range(i + 1, len(impls))]
    head = "| W | MiB | " + " | ".join(f"{n} busbw GB/s" for n, _, _ in impls)
    head += " | " + " | ".join(f"{impls[i][0]} / {impls[j][0]}" for i, j in pairs) + " | load |"
    print(head)
    print("|" + "---|" * (2 + len(impls) + len(pairs) + 1))
    for w in worlds:
        for mib in sizes:
            size = mib << 20
            med = [statistics.median(figs[(n, w, size)]) for n, _, _ in impls]
            runs = [figs[(n, w, size)] for n, _, _ in impls]
            cells = [f"{m:.2f} ({', '.join(f'{x:.2f}' for x in r)})" for m, r in zip(med, runs)]
            ratios = [f"{med[i] / med[j]:.2f}" for i, j in pairs]
            load = ", ".join(f"{x:.1f}" for x in loads[w])
            print(f"| {w} | {mib} | " + " | ".join(cells) + " | " + " | ".join(ratios) +
                  f" | {load} |")

if __name__ == "__main__":
    main()
