#!/usr/bin/env python3
"""Steps/s of data-parallel training at world 1, 2 and 4 on the CPU: DDP on
gloo (the anchor of issue 13's "steps/s at world 1, 2, 4" row) and, with
--build, Starling's elastic job of the same model and batch.

    python3 bench/elastic/ddp_steps.py [--worlds 1,2,4] [--models mlp,cnn]
        [--runs 3] [--global-batch 256] [--python /usr/bin/python3 ...]
        [--build build-pC]

DDP: W processes of bench/elastic/torch_ddp_bench.py on 127.0.0.1
(env:// rendezvous, gloo, torch.set_num_threads(1) each), the global batch
split across the ranks, SGD with momentum; each does --warmup steps, then
--steps timed ones; a run's figure is --steps divided by the slowest
rank's time from its step --warmup to its last (wall clock, from the
ranks' own STEP lines). Starling (--build): W peers, an elastic job with
nodes min = max = W, each peer with --threads 1, the built-in trainer's model (mlp:256,128 or
cnn:32,64), the same batch and optimizer; its steps/s is read from
`peerctl status JOB --json` ("step") over --starling-seconds once the
world of W is stepping. Runs interleave the implementations; the table
gives the median of the runs and each run's figure, and a second table
the CPU time a step costs, every process of the world together (DDP: the
ranks' own process_time over the timed steps; Starling: the peers'
/proc/PID/stat over the same window as the steps), a figure a loaded
machine moves far less than steps/s. The machine's core
count is printed: W above it oversubscribes (W=4 on 2 cores runs two
ranks per core, and each rank's gloo thread shares them too).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_ddp_bench.py")
sys.path.insert(0, HERE)
from recovery import FAST_TIMERS, Node, free_port, peer_events, wait_until  # noqa: E402


def ddp_run(a, py, model, w):
    """steps/s of one DDP run of w processes."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="sl-ddp-steps-")
    procs = []
    try:
        for r in range(w):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                       WORLD_SIZE=str(w), LOCAL_RANK=str(r), BENCH_NODE=f"r{r}", OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen(
                [py, WORKER, "--model", model, "--global-batch", str(a.global_batch),
                 "--steps", str(a.warmup + a.steps[model]), "--step-every", "1", "--threads", "1",
                 "--step-log", tmp], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True))
        for p in procs:
            _, err = p.communicate(timeout=a.timeout)
            if p.returncode != 0:
                raise RuntimeError(f"{py} rank exited {p.returncode}: {err[-1500:]}")
        spans, cpu = [], 0.0
        for fn in os.listdir(tmp):
            t, c = {}, {}
            with open(os.path.join(tmp, fn)) as f:
                for line in f:
                    m = re.match(r"STEP .*step=(\d+) wall_ms=(\d+) cpu_ms=(\d+)", line)
                    if m:
                        t[int(m.group(1))] = int(m.group(2))
                        c[int(m.group(1))] = int(m.group(3))
            last = a.warmup + a.steps[model]
            spans.append((t[last] - t[a.warmup]) / 1000)
            cpu += (c[last] - c[a.warmup]) / 1000
        return a.steps[model] / max(spans), cpu / a.steps[model]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def proc_cpu_s(pid):
    """CPU seconds (user + system, every thread) a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def starling_run(a, model, w):
    """steps/s of one elastic job of w peers (read from status --json)."""
    tmp = tempfile.mkdtemp(prefix="sl-elastic-steps-")
    peer, peerctl = os.path.join(a.build, "peer"), os.path.join(a.build, "peerctl")
    nodes, ports = [], []
    names = [f"p{i}" for i in range(w)]

    def ctl(*args):
        return subprocess.run([peerctl, "--peer", os.path.join(tmp, "data", "p0"), "--timeout", "2000",
                               *args], capture_output=True, text=True, timeout=10)
    try:
        for i, n in enumerate(names):
            ports.append(free_port(set(ports)))
            ring = free_port(set(ports))
            ports.append(ring)
            argv = [peer, "--name", n, "--listen", f"127.0.0.1:{ports[2 * i]}", "--ring-port", str(ring),
                    "--threads", "1",
                    "--data",
                    os.path.join(tmp, "data", n), "--log-level", "info"] + FAST_TIMERS
            if i:
                argv += ["--join", f"127.0.0.1:{ports[0]}"]
            nodes.append(Node(n, argv, os.path.join(tmp, n + ".log")))

        def members():
            p = ctl("members", "--json")
            try:
                return p.returncode == 0 and sum(m["state"] == "alive" for m in json.loads(p.stdout)) >= w
            except ValueError:
                return False
        wait_until("peers converged", members, 60, 0.2, nodes=nodes)
        job = {"kind": "elastic", "name": f"bench-steps-{model}-{w}", "seed": 1,
               "nodes": {"min": w, "max": w}, "epochs": 1000, "global_batch": a.global_batch,
               "checkpoint_every": 1000000,
               "trainer": {"type": "builtin", "model": "mlp:256,128" if model == "mlp" else "cnn:32,64"},
               "dataset": "fashion-mnist",
               "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0}}
        path = os.path.join(tmp, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        p = ctl("submit", path)
        if p.returncode != 0:
            raise RuntimeError(f"peerctl submit: {p.stderr.strip()}")
        jid = p.stdout.strip().split()[-1]

        def stepping():
            ev = []
            for n in names:
                ev += peer_events(os.path.join(tmp, n + ".log"), n)
            return len({d["node"] for d in ev if d["ev"] == "ELASTIC-STEPPING"}) >= w

        wait_until("world stepping", stepping, 120, 0.1, nodes=nodes)

        def step():
            p = ctl("status", jid, "--json")
            return json.loads(p.stdout)["step"], time.time(), sum(proc_cpu_s(n.proc.pid) for n in nodes)
        time.sleep(a.starling_warmup_s)
        s0, t0, c0 = step()
        time.sleep(a.starling_seconds)
        s1, t1, c1 = step()
        return (s1 - s0) / (t1 - t0), (c1 - c0) / max(s1 - s0, 1)
    finally:
        for n in nodes:
            n.close()
        shutil.rmtree(tmp, ignore_errors=True)


def torch_version(py):
    p = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                       text=True, timeout=120)
    return p.stdout.strip() or None


def print_table(names, models, worlds, unit, runs, scale, digits):
    """One markdown row per model and world: each side's median, then every run."""
    fmt = lambda x: "-" if x is None else f"{x:.{digits}f}"
    print("| model | W | " + " | ".join(f"{n} {unit}" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for model in models:
        for w in worlds:
            cells = []
            for n in names:
                xs = [None if x is None else x * scale for x in runs[(n, model, w)]]
                ok = [x for x in xs if x is not None]
                cells.append(fmt(statistics.median(ok) if ok else None) + " (" +
                             ", ".join(fmt(x) for x in xs) + ")")
            print(f"| {model} | {w} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mlp-steps", type=int, default=300)
    ap.add_argument("--cnn-steps", type=int, default=30)
    ap.add_argument("--python", action="append", default=None,
                    help="a python with torch (repeatable; default /usr/bin/python3)")
    ap.add_argument("--build", default="", help="also measure Starling's peers from this build dir")
    ap.add_argument("--starling-warmup-s", type=float, default=3)
    ap.add_argument("--starling-seconds", type=float, default=10)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    a.steps = {"mlp": a.mlp_steps, "cnn": a.cnn_steps}
    pys = a.python or ["/usr/bin/python3"]
    impls = [(f"ddp {torch_version(py)}", py) for py in pys]
    if a.build:
        impls.append(("starling", None))
    worlds = [int(x) for x in a.worlds.split(",")]
    models = a.models.split(",")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}; global batch {a.global_batch}", flush=True)
    res, cpus = {}, {}
    for run in range(a.runs):
        for model in models:
            for w in worlds:
                order = impls if run % 2 == 0 else impls[::-1]
                for name, py in order:
                    load = os.getloadavg()[0]
                    try:
                        v, cpu = starling_run(a, model, w) if py is None else ddp_run(a, py, model, w)
                    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as e:
                        print(f"# {name} {model} W={w}: {e}", flush=True)
                        v = cpu = None
                    res.setdefault((name, model, w), []).append(v)
                    cpus.setdefault((name, model, w), []).append(cpu)
                    print(json.dumps({"impl": name, "model": model, "world": w, "run": run + 1,
                                      "steps_per_s": v, "cpu_ms_per_step": cpu and cpu * 1000,
                                      "load": round(load, 1)}), flush=True)
    print()
    names = [n for n, _ in impls]
    print_table(names, models, worlds, "steps/s", res, 1, 1)
    print()
    print("CPU ms a step, every process of the world together (median, then each run):")
    print_table(names, models, worlds, "CPU ms/step", cpus, 1000, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
