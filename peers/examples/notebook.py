#!/usr/bin/env python3
"""Notebook-style: submit a study, watch it, print and plot its results.

Run it cell by cell in Jupyter (each "# %%" is a cell) or as a script:

    PYTHONPATH=python python3 peers/examples/notebook.py \\
        --peer DATA_DIR_OR_HOST:PORT [--key cluster.key] [--study peers/examples/torch-study.json]

It needs a running peer (`peer --allow-commands` in an open cluster for
command trainers). Plots with matplotlib when it is installed
(results.png); otherwise it saves the peer's own SVG curves (plot command).
"""
# %%
import argparse
import time

import starling

ap = argparse.ArgumentParser()
ap.add_argument("--peer", default=None, help="data dir, ipc://PATH or HOST:PORT")
ap.add_argument("--key", default=None, help="cluster key file (TCP endpoint of a keyed cluster)")
ap.add_argument("--study", default="peers/examples/command-template.json")
ap.add_argument("--out", default="results")
a = ap.parse_args()

client = starling.Client(peer=a.peer, key=a.key)
print("peer", client.version(), "members:", [m["name"] for m in client.members()])

# %% submit (the same file again returns the same id)
study = client.submit(a.study)
print("study", study)

# %% watch its progress
t0 = time.monotonic()
for st in client.watch_study(study, interval=1.0):
    states = [t["state"] for t in st["trials"]]
    best = max((t["metrics"].get(st["objective"], float("-inf"))
                for t in st["trials"] if "metrics" in t), default=None)
    print(f"{time.monotonic() - t0:6.1f}s  {len(states)}/{st['budget']} trials  "
          f"running {states.count('running')}  done {states.count('done')}  best {best}")

# %% results: a list of dicts, one per trial (pandas.DataFrame(rows) if you like)
rows = client.results(study)
objective = client.status(study)["objective"]
rows.sort(key=lambda r: r.get(objective, float("-inf")), reverse=True)
for r in rows[:10]:
    print({k: r[k] for k in r if k not in ("owner", "failures")})
print(client.report(study)["leaderboard"])

# %% plot
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [r for r in rows if objective in r]
    key = next((k for k in ("lr",) if all(k in r for r in done)), None)
    xs = [r[key] if key else i for i, r in enumerate(done)]
    plt.scatter(xs, [r[objective] for r in done])
    if key == "lr":
        plt.xscale("log")
    plt.xlabel(key or "trial")
    plt.ylabel(objective)
    plt.savefig(a.out + ".png")
    print("wrote", a.out + ".png")
except ImportError:
    svg = client.call_json("plot", study).get("curves.svg")
    if svg:
        with open(a.out + ".svg", "w") as f:
            f.write(svg)
        print("wrote", a.out + ".svg (matplotlib is not installed)")
