#!/usr/bin/env python3
"""Writes bench/results/study.md from the raw results of bench/study/run
(a directory of failover.txt, ray-failover.txt, overhead.jsonl,
scaling.jsonl). Every figure beside its anchor and target."""
import argparse, datetime, json, os, platform, statistics, subprocess


def jlines(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    return rows


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.rstrip("\n") for l in f]


def ok(b):
    return "**met**" if b else "**not met**"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--parts", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--source", default="", help="the source tree the peers were built from")
    a = ap.parse_args()
    d = a.dir
    src = a.source or "."
    rev = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    with open("/proc/loadavg") as f:
        load_end = " ".join(f.read().split()[:3])
    cmds = lines(os.path.join(d, "commands.txt")) or [a.command]
    md = ["# Study benchmarks (issue 5)", "",
          "Command" + ("s" if len(cmds) > 1 else "") + ": " + "; then ".join(
              f"`{c}`" for c in cmds) + ". Date: "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; peers built from "
          f"commit {rev}{' with local changes' if dirty else ''}. "
          f"Machine: {os.cpu_count()} cores ({cpu_model()}), shared with other work; "
          f"load average at the end {load_end} (each part's load is given with it). "
          "Every timed part ran holding /tmp/starling-bench.lock; the other sides of each "
          "comparison ran in the same invocation, on the same machine.", ""]

    # ---- failover ----
    fo = lines(os.path.join(d, "failover.txt"))
    md += ["## Failover", ""]
    summ = next((json.loads(l) for l in reversed(fo) if l.startswith("{")), None)
    if summ:
        med, p99 = summ["median_s"], summ["p99_s"]
        md += ["`bench/study/failover.py`: 4 peers (default timers: probe every 1 s, probe "
               "timeout 400 ms, suspicion 1 s), 2 slots each, a FIFO study of 4 long command trials "
               "(`trial.py`: an epoch every 0.5 s, a checkpoint after each), so free slots "
               "exist to resume on. Each run kills with `kill -9` the owner of a trial that "
               "has a replicated checkpoint, and times from the kill to the trial's own start "
               "record on another peer (which says the epoch it resumed from); then the "
               "killed peer is restarted and rejoins.", "",
               "| figure | Starling | target | anchor |", "|---|---|---|---|",
               f"| median time to run again (s) | {med:.2f} | <= 3 ({ok(med <= 3)}) | "
               f"torchrun elastic agent, measured here: about 45 s ({45 / med:.0f}x) |",
               f"| p99 (s) ({summ['runs']} runs: the largest) | {p99:.2f} | <= 6 "
               f"({ok(p99 <= 6)}) | |",
               f"| min / max (s) | {summ['min_s']:.2f} / {summ['max_s']:.2f} | | |",
               f"| runs that resumed without a checkpoint | "
               f"{summ.get('resumed_without_checkpoint', '?')} | 0 | |", "",
               "Each run:", "", "```"] + [l for l in fo if l.startswith("run ")] + ["```", ""]
    else:
        md += ["Not run in this invocation.", ""]

    rf = lines(os.path.join(d, "ray-failover.txt"))
    rsum = next((json.loads(l) for l in reversed(rf) if l.startswith("{")), None)
    md += ["### Ray Tune with trial checkpoints", ""]
    if rsum:
        wk, hk = rsum.get("worker_kill", {}), rsum.get("head_kill", {})
        md += [f"`bench/study/ray_failover.py`, Ray {rsum.get('ray', '?')}: "
               f"{rsum['setup']}. Trials report a checkpoint every 0.5 s epoch.", "",
               "| event | what Ray Tune did |", "|---|---|"]
        if wk.get("resumed"):
            md.append(f"| kill -9 of the worker node running a trial ({wk['runs']} times) | "
                      f"the trial failed and was restarted from its checkpoint on another "
                      f"node {wk['resumed']} of {wk['runs']} times, median "
                      f"{wk['median_s']:.2f} s after the kill (max {wk['max_s']:.2f} s; "
                      f"resumed from epochs {wk['from_epochs']}); Starling's median is "
                      f"{(wk['median_s'] / summ['median_s']) if summ else float('nan'):.1f}x "
                      f"faster |")
        else:
            md.append(f"| kill -9 of the worker node running a trial | did not resume: "
                      f"{json.dumps(wk)} |")
        if hk:
            if hk.get("fit_returned"):
                what = (f"`Tuner.fit()` ended {hk['fit_after_s']} s after the kill"
                        + (f" with `{hk['fit_error']}`" if hk.get("fit_error") else ""))
            else:
                what = (f"`Tuner.fit()` neither returned nor raised in the {hk['waited_s']} s "
                        f"watched; no trial started again ({hk['trial_starts_after']} starts): "
                        "the run is stuck until someone restarts the head and resumes the "
                        "experiment by hand (`Tuner.restore`)")
            drv = next((l.split(":", 1)[1].strip() for l in rf if l.startswith("driver exit:")),
                       None)
            if drv and not drv.startswith("0"):
                what += (f"; then the driver process itself (Tune's controller) ended with "
                         f"status {drv}")
            md.append(f"| kill -9 of the head node (GCS, its raylet) | {what} |")
        md += ["", "Starling has no head: any peer's death is the case measured above.", ""]
    else:
        md += ["Not run in this invocation.", ""]

    # ---- overhead ----
    ov = jlines(os.path.join(d, "overhead.jsonl"))
    md += ["## Scheduling overhead", ""]
    if ov:
        by = {}
        for r in ov:
            by.setdefault(r["side"], []).append(r)

        def med(side, key):
            v = [r[key] for r in by.get(side, []) if key in r]
            return statistics.median(v) if v else None
        st = by.get("starling", [{}])[0]
        nr = len(by.get("starling", []))
        md += [f"`bench/study/overhead.py`, {nr} round{'s' if nr != 1 else ''}, each "
               "running every side one after the other. No-op trials: Starling runs a "
               f"random-search FIFO study of {st.get('trials', '?')} one-epoch command "
               "trials (`echo` of one report) on 4 peers with 4 slots each, timed from "
               "`peerctl submit` until the study is finished; Optuna runs 4 worker "
               "processes (RandomSampler, objective returns at once) on one SQLite file and "
               "on a journal file, timed from a barrier that opens once all four are "
               "connected; Ray Tune runs function trainables that return at once on a head "
               "and 3 worker nodes (`ray.cluster_utils.Cluster`: a raylet each, on "
               "loopback, 1 CPU each, `reuse_actors=True`), fewer trials because it is "
               "slow. Trials per second = completed / seconds; lost = not completed.", "",
               "| side | trials/s (median) | each round | lost | Starling / side | anchor |",
               "|---|---|---|---|---|---|"]
        s_rate = med("starling", "trials_per_s")
        anchors = {"starling": "", "optuna-sqlite": "about 70/s measured here before",
                   "optuna-journal": "about 500/s, workers crashed and left trials running",
                   "ray": "Ray publishes about 14/s (9 ms a trial) for its 10,000-trial test"}
        for side in ["starling", "optuna-sqlite", "optuna-journal", "ray"]:
            rs = by.get(side, [])
            if not rs:
                continue
            errs = [r["error"] for r in rs if "error" in r]
            m = med(side, "trials_per_s")
            each = ", ".join(f"{r['trials_per_s']}" if "trials_per_s" in r else "error"
                             for r in rs)
            lost = sum(r.get("lost", 0) for r in rs)
            ratio = f"{s_rate / m:.2f}x" if m and s_rate and side != "starling" else ""
            md.append(f"| {side} | {m if m is not None else 'error'} | {each} | {lost} | "
                      f"{ratio} | {anchors[side]} |")
            if errs:
                md.append(f"| | error: {errs[0]} | | | | |")
        cpu = med("starling", "peer_cpu_ms_per_trial")
        sq = med("optuna-sqlite", "trials_per_s")
        ray = med("ray", "trials_per_s")
        lost = sum(r.get("lost", 0) for r in by.get("starling", []))
        md += ["", "| target | value | |", "|---|---|---|"]
        if s_rate and sq:
            md.append(f"| >= 10x Optuna on SQLite | {s_rate / sq:.2f}x | {ok(s_rate >= 10 * sq)} |")
        if s_rate and ray:
            md.append(f"| ahead of Ray Tune | {s_rate / ray:.1f}x | {ok(s_rate > ray)} |")
        md.append(f"| no trial lost (Starling, all rounds) | {lost} lost | {ok(lost == 0)} |")
        if cpu is not None:
            md.append(f"| <= 1 ms of peer CPU per trial (utime+stime of the 4 peers / trials, "
                      f"median) | {cpu:.2f} ms | {ok(cpu <= 1)} |")
        md += ["", "Load average before each side: " + "; ".join(
            f"{r['side']} {r.get('loadavg_before', '?')}" for r in ov) + ".", ""]

        md += ["## Memory", ""]
        rss = [r.get("peer_rss_max_mb") for r in by.get("starling", []) if "peer_rss_max_mb" in r]
        hwm = [max(r["peer_vmhwm_mb"].values()) for r in by.get("starling", [])
               if "peer_vmhwm_mb" in r]
        if rss:
            worst = max(hwm) if hwm else max(rss)
            md += [f"Each peer's resident memory while the {st.get('trials', '?')}-trial "
                   "no-op study above runs (command trials: the training is in child "
                   "processes, not counted): sampled RSS every 20 ms, and the kernel's peak "
                   "(VmHWM) at the end.", "",
                   "| figure | value | target |", "|---|---|---|",
                   f"| largest sampled RSS of a peer (MB), per round | "
                   f"{', '.join(f'{x:.1f}' for x in rss)} | |",
                   f"| largest peak RSS (VmHWM) of a peer (MB) | {worst:.1f} | <= 64 "
                   f"({ok(worst <= 64)}) |", ""]
    else:
        md += ["Not run in this invocation.", ""]

    # ---- busy-cpu ----
    bc = jlines(os.path.join(d, "busy-cpu.jsonl"))
    md += ["## The runtime's CPU beside training", ""]
    sides = {}
    for r in bc:
        if "side" in r:
            sides.setdefault(r["side"], []).append(r)
    if sides:
        md += ["`bench/study/busy_cpu.py`: 4 nodes with 2 slots each run 8 trials that sleep "
               "40 s (Starling: 4 peers, a FIFO study of command trials; Ray Tune: a head and "
               "3 worker nodes of 2 CPUs, function trials); once all 8 run, the CPU (utime + "
               "stime) of the runtime's own processes over 10 s: the peers for Starling (not "
               "their trials' shells), every process of the Ray cluster and Tune's driver for "
               "Ray (its sleeping trials' workers included: their runtime's threads). What the "
               "runtime takes from the training beside it, per node.", "",
               "| side | ms of CPU a second a node (median) | each run | Ray / Starling |",
               "|---|---|---|---|"]
        med = {}
        for side, rs in sides.items():
            vals = [r["per_node_ms_per_s"] for r in rs if "per_node_ms_per_s" in r]
            med[side] = statistics.median(vals) if vals else None
        for side, rs in sides.items():
            each = ", ".join(str(r.get("per_node_ms_per_s", "error")) for r in rs)
            ratio = (f"{med[side] / med['starling']:.1f}x" if side != "starling" and med[side]
                     and med.get("starling") else "")
            md.append(f"| {side} | {med[side] if med[side] is not None else 'error'} | {each} | "
                      f"{ratio} |")
        turns = [r["turns_per_s"] for r in sides.get("starling", []) if "turns_per_s" in r]
        if turns:
            md += ["", f"Starling's study turns a second (median of the peers, each run): "
                       f"{', '.join(str(t) for t in turns)}."]
        errs = [r["error"] for rs in sides.values() for r in rs if "error" in r]
        if errs:
            md += ["", f"Errors: {errs[0]}"]
        md.append("")
    else:
        md += ["Not run in this invocation.", ""]

    # ---- scaling ----
    sc = jlines(os.path.join(d, "scaling.jsonl"))
    md += ["## Scaling", ""]
    rows = [r for r in sc if "peers" in r]
    summ = next((r["summary"] for r in sc if "summary" in r), [])
    if rows:
        su = {s["peers"]: s for s in summ}
        md += ["`bench/study/scaling.py`: real peers on loopback, one slot each, a "
               "200-trial ASHA study (min 1, max 9 epochs, reduction 3) of shell command "
               "trials that sleep 0.25 s an epoch (simulated training time), report and "
               "checkpoint; a quarter of the peers (N // 4) churn: each is killed with "
               "`kill -9` about every 8 s (staggered) and restarted 1 s later. Time from "
               "submit (once every peer may claim: `--wait-ready`) until the study is "
               "finished. Speed-up = T(1) / T(N). `bench/study/asha_bound.py` gives what "
               "ASHA itself allows on this workload with no overhead and no churn "
               "(efficiency 0.97 at 8 peers, 0.88 at 16, 0.76 at 32).", "",
               "| peers | churning | kills | seconds | trials done | speed-up | "
               "efficiency (target >= 0.9) | load at the end |",
               "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "error" in r:
                md.append(f"| {r['peers']} | | | error: {r['error']} | | | | |")
                continue
            s = su.get(r["peers"], {})
            eff = s.get("efficiency")
            md.append(f"| {r['peers']} | {r['churners']} | {r['kills']} | {r['seconds']} | "
                      f"{r['states'].get('done', 0)} of {r['trials']} | "
                      f"{s.get('speedup', '')} | {eff} "
                      f"{'' if eff is None or r['peers'] == 1 else ok(eff >= 0.9)} | "
                      f"{r['loadavg_end']} |")
        md += [""]
    else:
        md += ["Not run in this invocation.", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
