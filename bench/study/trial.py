#!/usr/bin/env python3
"""The failover benchmark's trial: a command trial that trains `--epochs`
epochs of `--seconds` each (a sleep), reports one JSON line per epoch and
checkpoints after each (the epoch, in $STARLING_CHECKPOINT_DIR/ck.json).

Each start appends one line to --events: `start WALL_S TRIAL PEER FROM_EPOCH`
(PEER is read from the checkpoint directory, DATA/PEER/studies/S/T), so the
benchmark sees when and where a killed trial runs again and from which
epoch. One write(2) per line on an O_APPEND file: lines never interleave.
"""
import argparse, json, os, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=40)
ap.add_argument("--seconds", type=float, default=0.5)
ap.add_argument("--events", required=True)
ap.add_argument("--x", type=float, default=0.5)
a = ap.parse_args()

t0 = time.time()
ckdir = os.environ.get("STARLING_CHECKPOINT_DIR", "")
trial = os.environ.get("STARLING_TRIAL_ID", "?")
ckpt = os.path.join(ckdir, "ck.json")
start = 0
if os.path.exists(ckpt):
    with open(ckpt) as f:
        start = json.load(f)["epoch"]
parts = ckdir.split(os.sep)
peer = parts[parts.index("studies") - 1] if "studies" in parts else "?"
fd = os.open(a.events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, f"start {t0:.3f} {trial} {peer} {start}\n".encode())
os.close(fd)

target = int(os.environ.get("STARLING_EPOCHS", a.epochs))
for epoch in range(start + 1, target + 1):
    time.sleep(a.seconds)
    print(json.dumps({"epoch": epoch, "score": round(a.x * epoch, 4)}), flush=True)
    tmp = ckpt + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"epoch": epoch}, f)
    os.replace(tmp, ckpt)
