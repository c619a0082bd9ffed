#!/usr/bin/env python3
"""Python client overhead against peerctl (issue 15): the `get` round trip
and submit -> first trial running, medians of several runs.

    PYTHONPATH=python /usr/bin/python3 bench/python/overhead.py [--build build] [--runs 7]

Starts one peer (open cluster, --allow-commands) in a temporary directory.
`get`: peerctl is a process per call, so it is timed two ways: a whole
`peerctl get` (what a shell script pays) and, for the protocol alone, the
Python client's call on an open connection. submit -> first running: from
the submit call until `status` shows a trial running, polled every 5 ms,
both through peerctl (submit, then status --json) and through
Client.submit/Client.status; each run submits a new study (its seed).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import starling

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--runs", type=int, default=7)
ap.add_argument("--gets", type=int, default=200)
a = ap.parse_args()
peer_bin = os.path.join(a.build, "peer")
peerctl = os.path.join(a.build, "peerctl")

tmp = tempfile.mkdtemp(prefix="sl-bench-py-")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = 20000 + s.getsockname()[1] % 10000
data = os.path.join(tmp, "p")
proc = subprocess.Popen([peer_bin, "--name", "p", "--listen", f"127.0.0.1:{port}", "--data", data,
                         "--allow-commands", "--log-level", "warning"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(data, "control.sock")):
        if time.monotonic() > deadline:
            sys.exit("peer did not start")
        time.sleep(0.05)
    c = starling.Client(peer=data)
    c.put("bench/k", "v" * 100)

    def ms(f):
        t = time.perf_counter()
        f()
        return (time.perf_counter() - t) * 1000

    def median_of(fn, n):
        return statistics.median(ms(fn) for _ in range(n))

    env = dict(os.environ, STARLING_PEER=data)
    pc_get = [median_of(lambda: subprocess.run([peerctl, "get", "bench/k"], env=env, check=True,
                                               stdout=subprocess.DEVNULL), 20)
              for _ in range(a.runs)]
    py_proc = [median_of(lambda: subprocess.run(
        [sys.executable, "-c", "import starling,sys; sys.stdout.buffer.write("
         "starling.Client().get('bench/k'))"], env=env, check=True,
        stdout=subprocess.DEVNULL), 10) for _ in range(a.runs)]
    py_import = [median_of(lambda: subprocess.run(
        [sys.executable, "-c", "import starling"], env=env, check=True), 10)
        for _ in range(a.runs)]
    py_get = [median_of(lambda: c.get("bench/k"), a.gets) for _ in range(a.runs)]

    def study(seed):
        return {"name": f"bench-{seed}", "seed": seed,
                "trainer": {"type": "command", "command": "sleep 5 # {x}", "timeout_s": 60},
                "search_space": {"x": {"type": "int", "low": 1, "high": 9}},
                "searcher": {"type": "random"}, "scheduler": {"type": "fifo", "epochs": 1},
                "objectives": [{"metric": "m", "goal": "max"}], "budget": {"trials": 1},
                "concurrency": 1}

    def running_py(sid):
        return any(t["state"] == "running" for t in c.status(sid)["trials"])

    def running_pc(sid):
        out = subprocess.run([peerctl, "status", sid, "--json"], env=env, check=True,
                             capture_output=True).stdout
        return any(t["state"] == "running" for t in json.loads(out)["trials"])

    def first_running(submit, running):
        t = time.perf_counter()
        sid = submit()
        while not running(sid):
            time.sleep(0.005)
        dt = (time.perf_counter() - t) * 1000
        c.cancel(sid)
        time.sleep(0.3)
        return dt

    seed = int(time.time()) % 100000 * 100
    pc_sub, py_sub = [], []
    for i in range(a.runs):
        f = os.path.join(tmp, f"s{i}.json")
        with open(f, "w") as fh:
            json.dump(study(seed + 2 * i), fh)
        pc_sub.append(first_running(lambda: subprocess.run(
            [peerctl, "submit", f], env=env, check=True, capture_output=True
        ).stdout.decode().split()[0], running_pc))
        py_sub.append(first_running(lambda: c.submit(study(seed + 2 * i + 1)), running_py))

    def row(name, xs):
        return f"| {name} | {statistics.median(xs):.2f} | {min(xs):.2f} | {max(xs):.2f} |"

    print(f"runs: {a.runs} (each get figure the median of its own calls)")
    print("| measure | median ms | min | max |")
    print("|---|---|---|---|")
    print(row("peerctl get (a process per call)", pc_get))
    print(row("python3 -c 'Client().get' (a process per call)", py_proc))
    print(row("python3 -c 'import starling' (interpreter start, no call)", py_import))
    print(row("Client.get on an open connection", py_get))
    print(row("peerctl submit -> first trial running", pc_sub))
    print(row("Client.submit -> first trial running", py_sub))
    print(f"ratio get (process per call, python/peerctl): "
          f"{statistics.median(py_proc) / statistics.median(pc_get):.2f}")
    print(f"ratio submit->running (python/peerctl): "
          f"{statistics.median(py_sub) / statistics.median(pc_sub):.2f}")
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)
    shutil.rmtree(tmp, ignore_errors=True)
