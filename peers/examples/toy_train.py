#!/usr/bin/env python3
"""A toy trainer for command-template studies (peers/examples/command-template.json).

Like AutoGluon's toy train_fn: a synthetic accuracy curve that depends on the
config, one JSON report per epoch on stdout, a checkpoint (the last epoch) in
$STARLING_CHECKPOINT_DIR so another peer can resume it. Needs only Python.
"""
import argparse, json, math, os, random, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--activation", default="relu")
ap.add_argument("--epochs", type=int, default=9)
ap.add_argument("--seconds", type=float, default=0.2, help="simulated time per epoch")
ap.add_argument("--state-bytes", type=int, default=0,
                help="also checkpoint this many bytes of model state (zstate.bin)")
a = ap.parse_args()

ckdir = os.environ.get("STARLING_CHECKPOINT_DIR", "")
ckpt = os.path.join(ckdir, "toy.json") if ckdir else ""
start = 0
if ckpt and os.path.exists(ckpt):
    with open(ckpt) as f:
        start = json.load(f)["epoch"]
    print(f"resuming from epoch {start}", file=sys.stderr)

# the best lr is 0.01; deeper is slightly better; gelu > relu > tanh
quality = math.exp(-(math.log10(a.lr) + 2) ** 2) * (0.9 + 0.03 * a.layers)
quality *= {"gelu": 1.0, "relu": 0.98, "tanh": 0.93}.get(a.activation, 0.9)
rng = random.Random(os.environ.get("STARLING_TRIAL_ID", "0"))
for epoch in range(start + 1, a.epochs + 1):
    time.sleep(a.seconds)
    acc = quality * (1 - 1.8 ** (-epoch)) + rng.uniform(-0.01, 0.01)
    print(json.dumps({"epoch": epoch, "accuracy": round(acc, 4), "loss": round(1 - acc, 4)}),
          flush=True)
    if ckpt:
        tmp = ckpt + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"epoch": epoch}, f)
        os.replace(tmp, ckpt)
        if a.state_bytes:
            state = os.path.join(ckdir, "zstate.bin")
            with open(state + ".tmp", "wb") as f:
                f.write(bytes((epoch + i) % 256 for i in range(a.state_bytes)))
            os.replace(state + ".tmp", state)
