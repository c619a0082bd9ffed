#!/usr/bin/env python3
"""The `train` benchmark: Starling (`peerctl train`) against PyTorch.

Run it through bench/train/run, which installs what it needs and builds
peerctl; this file only runs the contestants and writes the table.

Method (the machine is shared and noisy, so everything is interleaved and
every figure is a median):
 * Recipe: one per model (RECIPES), passed identically to both sides: the
   same data, batch, optimizer, learning-rate schedule, weight decay,
   epochs, seed and initialisation scheme.
 * Thread sweep: every thread setting of every side (PyTorch: 1 thread, 2
   threads, 2 threads with OMP_WAIT_POLICY=PASSIVE; Starling: 1 and 2
   threads) runs one short epoch, `--sweep-rounds` times, the settings of
   all sides interleaved; each side keeps its fastest setting (median).
 * Timing pairs: `--pairs` rounds; in each, every side runs once in its
   best setting (Starling, PyTorch Debian, PyTorch PyPI, Starling, ...),
   `--timing-epochs` epochs of `--timing-limit` samples, each its own
   process. The first epoch of a process is warm-up and not counted; the
   others give the round's samples/s. Each round gives a ratio per pair
   (Starling / PyTorch); the table reports the medians.
 * Accuracy: one full run (`--epochs`, default 10) of Starling and of the
   fastest PyTorch build (both builds with --accuracy-all) in the best
   setting; its final test accuracy is reported, its epochs are listed.
 * Load: the 1-minute load average is read before every run; its min,
   median and max are reported with each model.
 * Each run is its own process; peak RSS is its ru_maxrss (wait4). Only
   training time is timed (evaluation excluded) on both sides. The
   environment's OpenBLAS settings are left as they are for both sides.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# The recipes (bench/results/train.md says why these): optimizer settings
# and schedule, the same on both sides. The MLP's optimizer, lr and batch
# are fixed by the issue; the schedule is ours to choose.
RECIPES = {
    "mlp": {"spec": "mlp:256,128", "torch": "mlp", "optimizer": "sgd", "lr": 0.05,
            "momentum": 0.9, "weight_decay": 0.0, "schedule": "cosine", "warmup": 0,
            "normalize": False},
    "cnn": {"spec": "cnn:32,64", "torch": "cnn", "optimizer": "sgd", "lr": 0.1,
            "momentum": 0.9, "weight_decay": 5e-4, "schedule": "cosine", "warmup": 1,
            "normalize": False},
}
MODELS = RECIPES

# PyTorch thread settings tried (label, torch threads, extra environment).
SETTINGS_CPU = [
    ("1 thread", 1, {}),
    ("2 threads", 2, {}),
    ("2 threads, OMP_WAIT_POLICY=PASSIVE", 2, {"OMP_WAIT_POLICY": "PASSIVE"}),
]
SETTINGS_QUICK = [("1 thread", 1, {})]
STARLING_CPU = [("1 thread", 1, {}), ("2 threads", 2, {})]
# Training samples of the short sweep epochs.
SWEEP_LIMIT = {"mlp": 15000, "cnn": 4000}
# Training samples of a timing epoch (default; --timing-limit overrides).
TIMING_LIMIT = {"mlp": 60000, "cnn": 12000}
FULL_N = 60000

# Why the recipes are what they are (rendered into the results file; the
# exploration behind it is in bench/results/train.md's history and
# docs/training.md). Figures: final test accuracy after 10 epochs, seed 1
# unless said otherwise, Starling unless said otherwise.
RECIPE_NOTES = """\
- **MLP**: the issue fixes SGD, momentum 0.9, lr 0.05, batch 128. With a
  constant rate the last epochs swing by ±0.5 points and 10 epochs end at
  88.0-88.3 % (seeds 1-5), under the 88.5 % target. A cosine decay to 0
  over the 10 epochs (per step, no warm-up) ends the noise and gives 89.10,
  89.05, 89.00 % (seeds 1-3); PyTorch with the same recipe: 89.08, 88.77,
  88.80 % (PyPI) and 89.04, 88.89, 88.83 % (Debian).
- **CNN** (architecture fixed by the issue): SGD momentum 0.9, lr 0.1,
  batch 128, 1 linear warm-up epoch, then cosine decay, weight decay 5e-4
  (L2, on all parameters, as torch.optim.SGD's weight_decay). Tried first
  (seed 1): lr 0.02 constant 89.5 %; cosine with lr 0.05 90.49, lr 0.05 at
  batch 64 90.68, lr 0.1 with 1 warm-up epoch 90.68, Adam lr 1e-3 90.39:
  all train to 93-95 % with test loss still falling, i.e. the gap is
  generalisation, and weight decay is what closed it: 5e-4 with lr 0.1 and
  warm-up 91.24 % (at batch 64 with lr 0.05: 90.70). Seeds 1-3: 91.24,
  91.53, 91.16 % (mean 91.31); PyTorch 2.15 (PyPI), seeds 1-2: 91.25,
  91.10 % (mean 91.18). Weight decay 1e-3 gave 91.35 % (seed 1): a little
  more margin, not tried on more seeds. Inputs standardised with
  `--normalize` were not needed (pixels / 255 as before, both sides).
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def run_json(cmd, env_extra, timeout):
    """Runs cmd; returns (JSON objects on its stdout, its peak RSS in kB from
    wait4, the tail of its stderr, exit status, wall seconds)."""
    env = dict(os.environ)
    env.update(env_extra)
    log("  $ " + " ".join(f"{k}={v}" for k, v in env_extra.items()) + (" " if env_extra else "")
        + " ".join(shlex.quote(c) for c in cmd))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        text, etext = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    objs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                objs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return objs, ru.ru_maxrss, etext[-600:], p.returncode, wall


class Contestant:
    def __init__(self, name, label, cmd_for, settings):
        self.name = name            # short id: starling, torch-debian, torch-pypi
        self.label = label          # table heading
        self.cmd_for = cmd_for      # (model, epochs, setting, limit) -> (cmd, env)
        self.settings = settings    # list of (label, threads, env) to try
        self.version = ""
        self.loads = []             # load averages read before its runs


def recipe_args(model, args):
    r = RECIPES[model]
    out = ["--epochs", None, "--batch", str(args.batch), "--optimizer", r["optimizer"],
           "--lr", str(r["lr"]), "--momentum", str(r["momentum"]), "--seed", str(args.seed)]
    if r["weight_decay"]:
        out += ["--weight-decay", str(r["weight_decay"])]
    if r["schedule"] != "none":
        out += ["--schedule", r["schedule"]]
    if r["warmup"]:
        out += ["--warmup", str(r["warmup"])]
    if r["normalize"]:
        out += ["--normalize"]
    return out


def with_epochs(argv, epochs):
    return [str(epochs) if a is None else a for a in argv]


def starling(peerctl, device, args):
    def cmd_for(model, epochs, setting, limit):
        cmd = [peerctl, "train", "--dataset", args.data, "--model", RECIPES[model]["spec"],
               "--device", device, "--json", "--quiet"] + with_epochs(recipe_args(model, args), epochs)
        if setting[1]:
            cmd += ["--threads", str(setting[1])]
        if limit:
            cmd += ["--limit", str(limit)]
        return cmd, dict(setting[2])
    settings = [("device cuda", 0, {})] if device == "cuda" else (
        STARLING_CPU[:1] if args.quick else STARLING_CPU)
    return Contestant("starling", "Starling", cmd_for, settings)


def torch_side(name, label, python, device, args):
    script = os.path.join(HERE, "torch_train.py")

    def cmd_for(model, epochs, setting, limit):
        cmd = [python, script, "--model", RECIPES[model]["torch"], "--device", device,
               "--data", args.data] + with_epochs(recipe_args(model, args), epochs)
        if setting[1]:
            cmd += ["--threads", str(setting[1])]
        if limit:
            cmd += ["--limit", str(limit)]
        return cmd, dict(setting[2])
    if device == "cuda":
        settings = [("device cuda", 0, {})]
    else:
        settings = SETTINGS_QUICK if args.quick else SETTINGS_CPU
    return Contestant(name, label, cmd_for, settings)


def one_run(c, model, setting, epochs, limit, args, skip_first):
    """One process: (samples/s over its counted epochs, epoch seconds list,
    peak RSS kB, load average before it, JSON epochs, error)."""
    load = loadavg()
    if load is not None:
        c.loads.append(load)
    cmd, env = c.cmd_for(model, epochs, setting, limit)
    objs, peak, err, rc, _ = run_json(cmd, env, args.timeout * max(1, epochs))
    eps = [o for o in objs if "epoch" in o]
    if rc != 0 or not eps:
        return None, None, None, load, None, f"rc {rc}: {err.strip()[-300:]}"
    for o in objs:
        if o.get("summary"):
            c.version = o.get("torch", c.version)
    secs = [o["seconds"] for o in eps]
    counted = secs[1:] if skip_first and len(secs) > 1 else secs
    n = limit or FULL_N
    return n / statistics.median(counted), secs, peak, load, eps, None


def measure_model(model, contestants, args):
    """Sweep, interleaved timing pairs, accuracy runs for one model."""
    res = {c.name: {"settings": {}, "error": None, "rounds": [], "rss": []} for c in contestants}
    # 1. Thread sweep, interleaved across sides and settings.
    sweep_n = min(args.limit or FULL_N, SWEEP_LIMIT[model])
    multi = [c for c in contestants if len(c.settings) > 1]
    for rnd in range(args.sweep_rounds if multi else 0):
        for c in multi:
            for setting in c.settings:
                sps, _, _, _, _, err = one_run(c, model, setting, 1, sweep_n, args, False)
                st = res[c.name]["settings"].setdefault(setting[0], {"setting": setting, "sps": [], "errors": []})
                if err:
                    st["errors"].append(err)
                else:
                    st["sps"].append(sps)
    for c in contestants:
        r = res[c.name]
        if len(c.settings) == 1:
            r["best"] = c.settings[0]
            continue
        ok = {k: v for k, v in r["settings"].items() if v["sps"]}
        if not ok:
            r["error"] = "; ".join(e for v in r["settings"].values() for e in v["errors"])[:400]
            continue
        r["best"] = max(ok.values(), key=lambda v: statistics.median(v["sps"]))["setting"]
    live = [c for c in contestants if not res[c.name]["error"]]
    # 2. Timing pairs: every side once per round, in its best setting.
    tlimit = args.timing_limit if args.timing_limit is not None else TIMING_LIMIT[model]
    tlimit = min(tlimit, args.limit) if args.limit else tlimit
    if tlimit >= FULL_N:
        tlimit = 0
    for rnd in range(args.pairs):
        row = {}
        for c in live:
            if res[c.name]["error"]:
                continue
            sps, secs, peak, load, _, err = one_run(c, model, res[c.name]["best"],
                                                    args.timing_epochs, tlimit, args, True)
            if err:
                res[c.name]["error"] = f"{res[c.name]['best'][0]}: {err}"
                continue
            res[c.name]["rounds"].append({"sps": sps, "secs": secs, "load": load})
            if peak:
                res[c.name]["rss"].append(peak)
            row[c.name] = sps
        s = row.get("starling")
        if s:
            log(f"bench: {model} round {rnd + 1}: " + ", ".join(
                f"Starling/{c.label} epoch time × {row[c.name] / s:.2f}"
                for c in live if c.name != "starling" and c.name in row))
    for c in live:
        r = res[c.name]
        if r["rounds"]:
            r["sps"] = statistics.median(x["sps"] for x in r["rounds"])
            r["epoch_s"] = FULL_N / r["sps"]
    # 3. Accuracy: Starling and the fastest PyTorch (or all).
    torches = [c for c in live if c.name != "starling" and res[c.name].get("sps")]
    acc_sides = [c for c in live if c.name == "starling"]
    if torches:
        acc_sides += torches if args.accuracy_all else [max(torches, key=lambda c: res[c.name]["sps"])]
    for c in (acc_sides if args.epochs > 0 else []):
        r = res[c.name]
        _, secs, peak, _, eps, err = one_run(c, model, r["best"], args.epochs, args.limit, args, False)
        if err:
            r["full_error"] = err
            continue
        r["test_acc"] = eps[-1].get("test_acc")
        r["accs"] = [o.get("test_acc") for o in eps]
        r["full_secs"] = secs
        if peak:
            r["rss"].append(peak)
    for c in contestants:
        r = res[c.name]
        r["rss_kb"] = max(r["rss"]) if r["rss"] else None
    return res


def pair_ratios(res, tname):
    """Per-round Starling/PyTorch epoch-time ratios (rounds both finished)."""
    s, t = res["starling"]["rounds"], res[tname]["rounds"]
    return [b["sps"] / a["sps"] for a, b in zip(s, t)]


def fmt(v, spec, none="–"):
    return none if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description="Starling vs PyTorch training benchmark "
                                 "(run it through bench/train/run).")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--quick", action="store_true", help="smoke test: small subset, 1 round")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--sweep-rounds", type=int, default=2,
                    help="rounds of the thread-setting sweep (default 2)")
    ap.add_argument("--pairs", type=int, default=0,
                    help="interleaved timing rounds (default: 5 for the MLP, 3 for the CNN)")
    ap.add_argument("--timing-epochs", type=int, default=2,
                    help="epochs per timing run, the first one not counted (default 2)")
    ap.add_argument("--timing-limit", type=int, default=None,
                    help="training samples per timing epoch (default: MLP 60000, CNN 12000)")
    ap.add_argument("--epochs", type=int, default=10, help="epochs of the accuracy run (0: none)")
    ap.add_argument("--accuracy-all", action="store_true",
                    help="accuracy run for both PyTorch builds, not only the fastest")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="training samples (0: all 60000)")
    ap.add_argument("--peerctl", required=True)
    ap.add_argument("--debian-python", default="/usr/bin/python3")
    ap.add_argument("--pypi-python", default=os.path.join(ROOT, "bench", ".venv", "bin", "python"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default=None, help="results file (default bench/results/train.md; '-' for none)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per epoch before giving up")
    ap.add_argument("--command", default="", help="the command line to record in the results")
    args = ap.parse_args()
    if args.quick:
        args.sweep_rounds, args.pairs, args.timing_epochs, args.epochs = 1, 1, 2, 1
        args.limit = args.limit or 6000
    if args.out is None:
        name = "train.md" if args.device == "cpu" else "train-cuda.md"
        args.out = "-" if args.quick else os.path.join(ROOT, "bench", "results", name)

    contestants = []
    notes = []
    if os.access(args.peerctl, os.X_OK):
        probe = subprocess.run([args.peerctl, "train", "--help"], capture_output=True, text=True)
        if probe.returncode == 0 and "--schedule" in probe.stdout + probe.stderr:
            contestants.append(starling(args.peerctl, args.device, args))
        else:
            notes.append(f"{args.peerctl} has no `train --schedule` yet: Starling not measured")
    else:
        notes.append(f"{args.peerctl} not found: Starling not measured")
    if args.device == "cpu" and os.access(args.debian_python, os.X_OK) and subprocess.run(
            [args.debian_python, "-c", "import torch, numpy"], capture_output=True).returncode == 0:
        contestants.append(torch_side("torch-debian", "PyTorch (Debian)", args.debian_python, "cpu", args))
    elif args.device == "cpu":
        notes.append(f"{args.debian_python} cannot import torch: Debian PyTorch not measured")
    if os.access(args.pypi_python, os.X_OK):
        contestants.append(torch_side("torch-pypi", "PyTorch (PyPI)", args.pypi_python, args.device, args))
    else:
        notes.append(f"{args.pypi_python} not found: PyPI PyTorch not measured")
    for n in notes:
        log("bench: " + n)

    t0 = time.monotonic()
    args.load_start = loadavg()
    results = {}
    for model in args.models.split(","):
        pairs = args.pairs
        if not pairs:
            args.pairs = 5 if model == "mlp" else 3
        log(f"bench: {model}: sweep, {args.pairs} interleaved timing rounds, accuracy runs")
        results[model] = measure_model(model, contestants, args)
        results[model]["pairs"] = args.pairs
        args.pairs = pairs
    args.wall_min = (time.monotonic() - t0) / 60
    if args.device == "cpu":
        args.gpu_note = gpu_probe(args)
    lines = render(args, contestants, results, notes)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out != "-":
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
        log(f"bench: wrote {args.out}")
    return 0 if all(not r.get("error") for m in results.values() for k, r in m.items()
                    if isinstance(r, dict)) else 1


def recipe_text(model):
    r = RECIPES[model]
    if r["optimizer"] in ("sgd", "nesterov"):
        t = f"{r['optimizer'].upper() if r['optimizer'] == 'sgd' else 'Nesterov'} momentum {r['momentum']} lr {r['lr']}"
    else:
        t = f"{r['optimizer'].capitalize()} lr {r['lr']}"
    if r["schedule"] != "none":
        t += f", {r['schedule']} schedule"
    if r["warmup"]:
        t += f" after {r['warmup']} warm-up epoch(s)"
    if r["weight_decay"]:
        t += f", weight decay {r['weight_decay']}"
    if r["normalize"]:
        t += ", inputs standardised"
    return t


def stats(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"


def render(args, contestants, results, notes):
    L = []
    L.append(f"# train benchmark ({args.device})")
    L.append("")
    L.append(f"Produced by `{args.command or 'bench/train/run'}` on "
             f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} "
             f"in {args.wall_min:.1f} minutes.")
    L.append("")
    L.append(f"Machine: {platform.node()}, {os.cpu_count()} CPUs ({cpu_model()}), "
             f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}.")
    vers = ", ".join(f"{c.label} {c.version}" for c in contestants if c.version)
    if vers:
        L.append(f"Versions: {vers}.")
    L.append(f"Data: Fashion-MNIST ({args.limit or FULL_N} training, 10000 test samples), "
             f"batch {args.batch}, seed {args.seed}, the same initialisation scheme (He-uniform, "
             "Xavier-uniform output, zero biases), pixels / 255, the partial last batch kept.")
    L.append(f"Method: thread settings swept ({args.sweep_rounds} interleaved rounds of one short "
             "epoch each; each side keeps its fastest); then interleaved timing rounds, each side "
             f"once per round in its best setting ({args.timing_epochs} epochs per process, the "
             "first not counted; 'epoch s' is 60000 samples at the round's rate); medians over "
             "rounds; ratios per round (Starling / PyTorch) and their median; then one "
             f"{args.epochs}-epoch accuracy run each for Starling and the fastest PyTorch. Peak RSS "
             "is each process's ru_maxrss (wait4), the max over its runs. Training time only "
             "(evaluation excluded) on both sides.")
    L.append("")
    for n in notes:
        L.append(f"- **Note:** {n}")
    if notes:
        L.append("")
    L.append("## Recipes (the same on both sides)")
    L.append("")
    L.extend(RECIPE_NOTES.rstrip().splitlines())
    L.append("")
    for model in args.models.split(","):
        res = results[model]
        r0 = RECIPES[model]
        tl = args.timing_limit if args.timing_limit is not None else TIMING_LIMIT[model]
        if args.limit:
            tl = min(tl, args.limit)
        L.append(f"## {model.upper()} (`{r0['spec']}`): {recipe_text(model)}, {args.epochs} epochs")
        L.append("")
        loads = [x for c in contestants for x in c.loads]
        L.append(f"Timing: {res['pairs']} interleaved rounds of {args.timing_epochs}-epoch runs of "
                 f"{min(tl, FULL_N)} samples.")
        L.append("")
        L.append("| | setting | epoch s | samples/s | test acc % | peak RSS MB | load avg (min / median / max) |")
        L.append("|---|---|---:|---:|---:|---:|---|")
        for c in contestants:
            r = res[c.name]
            if r.get("error") and not r.get("sps"):
                L.append(f"| {c.label} | failed: {r['error'][:200]} | | | | | |")
                continue
            acc = r.get("test_acc")
            L.append(f"| {c.label} | {r['best'][0]} | {fmt(r.get('epoch_s'), '.3f')} | "
                     f"{fmt(r.get('sps'), '.0f')} | "
                     f"{fmt(acc * 100 if acc is not None else None, '.2f')} | "
                     f"{fmt(r['rss_kb'] / 1024 if r.get('rss_kb') else None, '.0f')} | "
                     f"{stats([x['load'] for x in r['rounds']])} |")
        L.append("")
        s = res.get("starling")
        torches = [(c, res[c.name]) for c in contestants
                   if c.name != "starling" and res[c.name].get("sps")]
        if s and s.get("sps") and torches:
            for c, t in sorted(torches, key=lambda x: -x[1]["sps"]):
                rat = pair_ratios(res, c.name)
                L.append(f"- Starling / {c.label}: epoch time × {statistics.median(rat):.2f} "
                         f"(median of the rounds: " + ", ".join(f"{x:.2f}" for x in rat) + ")"
                         + (f", peak RSS × {s['rss_kb'] / t['rss_kb']:.2f}" if s.get("rss_kb") and t.get("rss_kb") else "")
                         + (f", test accuracy {100 * (s['test_acc'] - t['test_acc']):+.2f} points"
                            if s.get("test_acc") is not None and t.get("test_acc") is not None else "")
                         + ".")
            c, t = max(torches, key=lambda x: x[1]["sps"])
            L.append(f"- Targets (issue 4) against the fastest PyTorch ({c.label}): "
                     + targets(model, args, s, t, statistics.median(pair_ratios(res, c.name))))
            L.append("")
        L.append("<details><summary>every run</summary>")
        L.append("")
        for c in contestants:
            r = res[c.name]
            for label, st in r["settings"].items():
                if st["sps"]:
                    L.append(f"- {c.label}, sweep '{label}': "
                             + ", ".join(f"{x:.0f}" for x in st["sps"]) + " samples/s")
                for e in st["errors"]:
                    L.append(f"- {c.label}, sweep '{label}': {e[:200]}")
            if r["rounds"]:
                L.append(f"- {c.label}, timing rounds ('{r['best'][0]}'): "
                         + "; ".join(f"{x['sps']:.0f} samples/s (epochs "
                                     + ", ".join(f"{e:.2f}" for e in x["secs"])
                                     + f" s, load {fmt(x['load'], '.2f')})" for x in r["rounds"]))
            if r.get("accs"):
                L.append(f"- {c.label}, accuracy run: test accuracy per epoch "
                         + ", ".join(f"{100 * a:.2f}" for a in r["accs"] if a is not None)
                         + "; epoch s " + ", ".join(f"{e:.2f}" for e in r["full_secs"]))
            if r.get("full_error"):
                L.append(f"- {c.label}, accuracy run failed: {r['full_error'][:200]}")
            if r.get("error"):
                L.append(f"- {c.label}: {r['error'][:300]}")
        L.append("")
        L.append("</details>")
        L.append("")
    if getattr(args, "gpu_note", None):
        L.append("## GPU")
        L.append("")
        L.append(args.gpu_note)
        L.append("")
    return L


def gpu_probe(args):
    """One line on whether this machine can run the --device cuda benchmark."""
    try:
        p = subprocess.run([args.peerctl, "train", "--device", "cuda", "--epochs", "1",
                            "--limit", "256", "--quiet", "--dataset", args.data],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"GPU benchmark not run: probing the cuda backend failed ({e})."
    if p.returncode == 0:
        return ("A cuda device is usable here: run `bench/train/run --device cuda` for the GPU "
                "comparison (it writes bench/results/train-cuda.md).")
    why = (p.stderr.strip().splitlines() or ["unknown reason"])[-1]
    return ("GPU benchmark not run: this machine has no usable GPU (`peerctl train --device "
            f"cuda` says: {why}). On a machine with one, `bench/train/run --device cuda` "
            "measures Starling against PyTorch (PyPI, CUDA build) with the data on the GPU "
            "(target: MLP samples/s ≥ 1.5 × PyTorch's) and writes bench/results/train-cuda.md.")


def targets(model, args, s, t, ratio):
    """The issue's targets for Starling against PyTorch t, met or not
    (ratio: the median per-round epoch-time ratio)."""
    out = []
    if args.device == "cuda":
        if model == "mlp":
            out.append(f"samples/s ≥ 1.5 × PyTorch: {1 / ratio:.2f} × "
                       + ("met" if 1 / ratio >= 1.5 else "NOT met"))
    else:
        lim = 0.75 if model == "mlp" else 0.7
        out.append(f"epoch time ≤ {lim} ×: {ratio:.2f} × " + ("met" if ratio <= lim else "NOT met"))
        if s.get("rss_kb") and t.get("rss_kb"):
            r = s["rss_kb"] / t["rss_kb"]
            out.append(f"peak RSS ≤ 0.5 ×: {r:.2f} × " + ("met" if r <= 0.5 else "NOT met"))
    if s.get("test_acc") is not None and args.epochs >= 10 and not args.limit:
        floor = 88.5 if model == "mlp" else 91.0
        a = 100 * s["test_acc"]
        out.append(f"test accuracy ≥ {floor} %: {a:.2f} % " + ("met" if a >= floor else "NOT met"))
        if t.get("test_acc") is not None:
            d = 100 * (s["test_acc"] - t["test_acc"])
            out.append(f"equal accuracy (within 0.3 points): {d:+.2f} "
                       + ("met" if abs(d) <= 0.3 else ("Starling higher" if d > 0 else "NOT met")))
    return "; ".join(out) + "."


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
