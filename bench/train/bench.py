#!/usr/bin/env python3
"""The `train` benchmark: Starling (`peerctl train`) against PyTorch.

Run it through bench/train/run, which installs what it needs and builds
peerctl; this file only runs the contestants and writes the table.

Method
 * Each measurement is its own process; its peak resident memory is the
   child's ru_maxrss from wait4() (the same measure for both sides).
 * Timing runs: `--timing-epochs` epochs (default 2), repeated `--runs`
   times (default 3); the epoch time is the median of all their epochs.
   The machine is shared and noisy: medians, not means.
 * Accuracy run: one full run (`--epochs`, default 10) per contestant; its
   final test accuracy is reported, and its epochs count in the median too.
 * PyTorch runs in its best thread setting: each setting in SETTINGS is
   timed and the fastest (median) is the one reported; all are listed.
   Starling is tried with the environment's BLAS threads and with 1.
 * The environment's OPENBLAS_CORETYPE is left as it is for both sides.
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

# name -> (how the model is given to peerctl, to torch_train.py, default lr)
MODELS = {
    "mlp": {"spec": "mlp:256,128", "torch": "mlp", "optimizer": "sgd", "lr": 0.05, "momentum": 0.9},
    "cnn": {"spec": "cnn:32,64", "torch": "cnn", "optimizer": "sgd", "lr": 0.02, "momentum": 0.9},
}

# PyTorch thread settings tried (label, torch threads, extra environment).
SETTINGS_CPU = [
    ("1 thread", 1, {}),
    ("2 threads", 2, {}),
    ("2 threads, OMP_WAIT_POLICY=PASSIVE", 2, {"OMP_WAIT_POLICY": "PASSIVE"}),
]
SETTINGS_QUICK = [("1 thread", 1, {})]
STARLING_CPU = [("BLAS threads from the environment", 0), ("1 thread", 1)]
# Training samples of the one-epoch runs that pick the best thread setting.
SWEEP_LIMIT = {"mlp": 60000, "cnn": 10000}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


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
        self.cmd_for = cmd_for      # (model, epochs, setting) -> (cmd, env)
        self.settings = settings    # list of settings to try
        self.version = ""


def starling(peerctl, device, args):
    def cmd_for(model, epochs, setting, limit):
        m = MODELS[model]
        cmd = [peerctl, "train", "--dataset", args.data, "--model", m["spec"],
               "--epochs", str(epochs), "--batch", str(args.batch), "--optimizer", m["optimizer"],
               "--lr", str(m["lr"]), "--momentum", str(m["momentum"]), "--device", device,
               "--seed", "1", "--json", "--quiet"]
        if setting[1]:
            cmd += ["--threads", str(setting[1])]
        if limit:
            cmd += ["--limit", str(limit)]
        return cmd, {}
    settings = [("device cuda", 0)] if device == "cuda" else (
        STARLING_CPU[:1] if args.quick else STARLING_CPU)
    return Contestant("starling", "Starling", cmd_for, settings)


def torch_side(name, label, python, device, args):
    script = os.path.join(HERE, "torch_train.py")

    def cmd_for(model, epochs, setting, limit):
        m = MODELS[model]
        cmd = [python, script, "--model", m["torch"], "--epochs", str(epochs),
               "--batch", str(args.batch), "--optimizer", m["optimizer"], "--lr", str(m["lr"]),
               "--momentum", str(m["momentum"]), "--device", device, "--seed", "1",
               "--data", args.data]
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


def timed_runs(c, model, setting, runs, epochs, limit, timeout):
    """runs x epochs of one setting: (epoch seconds list, peak RSS kB, error)."""
    secs, rss = [], []
    for _ in range(runs):
        cmd, env = c.cmd_for(model, epochs, setting, limit)
        objs, peak, err, rc, _ = run_json(cmd, env, timeout * max(1, epochs))
        eps = [o for o in objs if "epoch" in o]
        if rc != 0 or not eps:
            return None, None, f"rc {rc}: {err.strip()[-300:]}"
        for o in objs:
            if o.get("summary"):
                c.version = o.get("torch", c.version)
        secs += [o["seconds"] for o in eps]
        if peak:
            rss.append(peak)
    return secs, (max(rss) if rss else None), None


def measure(c, model, args):
    """Sweeps c's thread settings on model (one short epoch each), then
    times the fastest: `runs` x `timing_epochs`, plus the full-length
    accuracy run. Returns the result dict."""
    res = {"settings": [], "error": None}
    n = args.limit or 60000
    if len(c.settings) > 1:
        sweep_n = min(n, SWEEP_LIMIT[model])
        for setting in c.settings:
            secs, _, err = timed_runs(c, model, setting, 1, 1, sweep_n, args.timeout)
            if err:
                res["settings"].append({"label": setting[0], "error": err})
            else:
                res["settings"].append({"label": setting[0], "setting": setting,
                                        "samples_per_s": sweep_n / secs[0], "sweep_n": sweep_n})
        ok = [s for s in res["settings"] if "samples_per_s" in s]
        if not ok:
            res["error"] = "; ".join(s.get("error", "") for s in res["settings"])
            return res
        best_setting = max(ok, key=lambda s: s["samples_per_s"])["setting"]
    else:
        best_setting = c.settings[0]
    runs = args.runs if model == "mlp" else args.cnn_runs
    secs, rss, err = timed_runs(c, model, best_setting, runs, args.timing_epochs, args.limit,
                                args.timeout)
    if err:
        res["error"] = f"{best_setting[0]}: {err}"
        return res
    best = {"label": best_setting[0], "setting": best_setting, "epochs": secs, "rss_kb": rss}
    res["best"] = best
    # One full-length run in the best setting, for accuracy (and more epochs).
    if args.epochs > 0:
        cmd, env = c.cmd_for(model, args.epochs, best_setting, args.limit)
        objs, peak, err, rc, _ = run_json(cmd, env, args.timeout * args.epochs)
        eps = [o for o in objs if "epoch" in o]
        if rc == 0 and eps:
            res["test_acc"] = eps[-1].get("test_acc")
            res["accs"] = [o.get("test_acc") for o in eps]
            res["full_epochs"] = len(eps)
            res["full_rss_kb"] = peak
            best["epochs"] = best["epochs"] + [o["seconds"] for o in eps]
        else:
            res["full_error"] = f"rc {rc}: {err.strip()[-300:]}"
    best["epoch_s"] = statistics.median(best["epochs"])
    rsss = [x for x in (best.get("rss_kb"), res.get("full_rss_kb")) if x]
    res["rss_kb"] = max(rsss) if rsss else None
    res["samples_per_s"] = n / best["epoch_s"]
    return res


def fmt(v, spec, none="–"):
    return none if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--quick", action="store_true", help="smoke test: small subset, 1 run")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--runs", type=int, default=3, help="MLP timing runs (best setting)")
    ap.add_argument("--cnn-runs", type=int, default=1, help="CNN timing runs (best setting)")
    ap.add_argument("--timing-epochs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10, help="epochs of the accuracy run (0: none)")
    ap.add_argument("--batch", type=int, default=128)
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
        args.runs, args.cnn_runs, args.timing_epochs, args.epochs = 1, 1, 1, 1
        args.limit = args.limit or 6000
    if args.out is None:
        name = "train.md" if args.device == "cpu" else "train-cuda.md"
        args.out = "-" if args.quick else os.path.join(ROOT, "bench", "results", name)

    contestants = []
    notes = []
    if os.access(args.peerctl, os.X_OK):
        probe = subprocess.run([args.peerctl, "train", "--help"], capture_output=True, text=True)
        if probe.returncode == 0 and "--json" in probe.stdout + probe.stderr:
            contestants.append(starling(args.peerctl, args.device, args))
        else:
            notes.append(f"{args.peerctl} has no `train --json` command yet: Starling not measured")
    else:
        notes.append(f"{args.peerctl} not found: Starling not measured")
    if args.device == "cpu" and os.access(args.debian_python, os.X_OK):
        contestants.append(torch_side("torch-debian", "PyTorch (Debian)", args.debian_python, "cpu", args))
    if os.access(args.pypi_python, os.X_OK):
        contestants.append(torch_side("torch-pypi", "PyTorch (PyPI)", args.pypi_python, args.device, args))
    else:
        notes.append(f"{args.pypi_python} not found: PyPI PyTorch not measured")
    for n in notes:
        log("bench: " + n)

    results = {}
    for model in args.models.split(","):
        for c in contestants:
            log(f"bench: {model} / {c.name}")
            results[(model, c.name)] = measure(c, model, args)

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
    return 0 if all(not r.get("error") for r in results.values()) else 1


def render(args, contestants, results, notes):
    L = []
    L.append(f"# train benchmark ({args.device})")
    L.append("")
    L.append(f"Produced by `{args.command or 'bench/train/run'}` on "
             f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.")
    L.append("")
    L.append(f"Machine: {platform.node()}, {os.cpu_count()} CPUs ({cpu_model()}), "
             f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, shared with other work, "
             "so figures are medians and noisy.")
    vers = ", ".join(f"{c.label} {c.version}" for c in contestants if c.version)
    if vers:
        L.append(f"Versions: {vers}.")
    L.append(f"Data: Fashion-MNIST ({args.limit or 60000} training, 10000 test samples), "
             f"batch {args.batch}, MLP {opt_text('mlp')}, CNN {opt_text('cnn')}, "
             "same initialisation scheme (He-uniform, Xavier-uniform output, zero biases), "
             "pixels / 255, the partial last batch kept.")
    L.append(f"Method: each side picks its fastest thread setting from one short epoch per "
             f"setting ({SWEEP_LIMIT['mlp']} samples for the MLP, {SWEEP_LIMIT['cnn']} for the CNN; "
             f"all listed below each table); the epoch time is the median over that setting's "
             f"timing runs (MLP {args.runs} × {args.timing_epochs} epochs, CNN {args.cnn_runs} × "
             f"{args.timing_epochs}) and the epochs of one {args.epochs}-epoch run, whose final test "
             f"accuracy is reported. Each run is its own process; peak RSS is its ru_maxrss (wait4). "
             f"Training time only (evaluation excluded) on both sides.")
    L.append("")
    for n in notes:
        L.append(f"- **Note:** {n}")
    if notes:
        L.append("")
    for model in args.models.split(","):
        L.append(f"## {model.upper()} (`{MODELS[model]['spec']}`)")
        L.append("")
        L.append("| | setting | epoch s | samples/s | test acc % | peak RSS MB |")
        L.append("|---|---|---:|---:|---:|---:|")
        for c in contestants:
            r = results[(model, c.name)]
            if r.get("error"):
                L.append(f"| {c.label} | failed: {r['error'][:200]} | | | | |")
                continue
            b = r["best"]
            acc = r.get("test_acc")
            L.append(f"| {c.label} | {b['label']} | {b['epoch_s']:.3f} | {r['samples_per_s']:.0f} | "
                     f"{fmt(acc * 100 if acc is not None else None, '.2f')} | "
                     f"{fmt(r['rss_kb'] / 1024 if r.get('rss_kb') else None, '.0f')} |")
        L.append("")
        s = results.get((model, "starling"))
        torches = [(c.label, results[(model, c.name)]) for c in contestants
                   if c.name.startswith("torch") and not results[(model, c.name)].get("error")]
        if s and not s.get("error") and torches:
            for tl, t in sorted(torches, key=lambda x: x[1]["best"]["epoch_s"]):
                ratio = s["best"]["epoch_s"] / t["best"]["epoch_s"]
                L.append(f"- Starling / {tl}: epoch time × {ratio:.2f} (samples/s × {1 / ratio:.2f})"
                         + (f", peak RSS × {s['rss_kb'] / t['rss_kb']:.2f}" if s.get("rss_kb") and t.get("rss_kb") else "")
                         + (f", test accuracy {100 * (s['test_acc'] - t['test_acc']):+.2f} points"
                            if s.get("test_acc") is not None and t.get("test_acc") is not None else "")
                         + ".")
            t = min((x[1] for x in torches), key=lambda r: r["best"]["epoch_s"])
            L.append("- Targets (issue 4) against the fastest PyTorch: " + targets(model, args, s, t))
            L.append("")
        L.append("<details><summary>every setting tried</summary>")
        L.append("")
        for c in contestants:
            r = results[(model, c.name)]
            for st in r["settings"]:
                if "samples_per_s" in st:
                    L.append(f"- {c.label}, {st['label']}: {st['samples_per_s']:.0f} samples/s "
                             f"(one epoch of {st['sweep_n']} samples)")
                else:
                    L.append(f"- {c.label}, {st['label']}: {st.get('error', '')[:200]}")
            if r.get("best"):
                L.append(f"- {c.label}, timed setting '{r['best']['label']}': epochs "
                         + ", ".join(f"{e:.3f}" for e in r["best"]["epochs"]) + " s")
            if r.get("accs"):
                L.append(f"- {c.label}, test accuracy per epoch: "
                         + ", ".join(f"{100 * a:.2f}" for a in r["accs"] if a is not None))
            if r.get("full_error"):
                L.append(f"- {c.label}, accuracy run failed: {r['full_error'][:200]}")
        L.append("")
        L.append("</details>")
        L.append("")
    if getattr(args, "gpu_note", None):
        L.append("## GPU")
        L.append("")
        L.append(args.gpu_note)
        L.append("")
    return L


def opt_text(model):
    m = MODELS[model]
    if m["optimizer"] == "sgd":
        return f"SGD momentum {m['momentum']} lr {m['lr']}"
    return f"{m['optimizer'].capitalize()} lr {m['lr']}"


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


def targets(model, args, s, t):
    """The issue's targets for Starling against PyTorch t, met or not."""
    out = []
    ratio = s["best"]["epoch_s"] / t["best"]["epoch_s"]
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
            out.append(f"equal accuracy (≥ −0.3 points): {d:+.2f} " + ("met" if d >= -0.3 else "NOT met"))
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
