#!/usr/bin/env python3
"""A peer's own CPU while its study's trials run: what the runtime takes
from the training beside it. 4 peers, 2 slots each, a FIFO study of 8
one-epoch command trials that sleep --trial-s seconds (so every slot is
busy and nothing changes for a while); once all 8 run, the peers' CPU
(utime + stime, not their children's) is sampled over --window seconds.
Prints ms of CPU per second per peer, each peer and the median, and the
study loop's turns a second.

    busy_cpu.py --build BUILD [--window 10] [--trial-s 40] [--runs 3]"""
import argparse, json, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, loadavg, proc_cpu_s


def spec(trial_s):
    return {
        "name": "busy", "seed": 1,
        "trainer": {"type": "command",
                    "command": "sleep %s; echo '{{\"epoch\": 1, \"x\": {x}}}'" % trial_s},
        "search_space": {"x": {"type": "real", "low": 0, "high": 1}},
        "scheduler": {"type": "fifo", "epochs": 1},
        "objectives": [{"metric": "x", "goal": "max"}],
        "budget": {"trials": 8}, "concurrency": 2, "lease_ms": 5000,
    }


def run_one(a):
    with Cluster(a.build, 4, extra=["--slots", "2"], tag="busy") as c:
        c.wait("the peers converge", c.converged, 60, 0.2)
        c.wait("every peer ready to claim", c.ready, 60, 0.1)
        sid = c.submit("p0", spec(a.trial_s))

        def all_running():
            st = c.ctl_json("p0", "status", sid) or {"trials": []}
            return sum(t["state"] == "running" for t in st["trials"]) == 8
        c.wait("all 8 trials running", all_running, 30, 0.2)
        time.sleep(1.0)  # the claims' writes settle before the window opens
        names = c.alive_names()
        turns0 = {p: (c.ctl_json(p, "stats") or {}).get("study", {}).get("turns", 0) for p in names}
        cpu0 = {p: proc_cpu_s(c.pid(p)) for p in names}
        t0 = time.time()
        time.sleep(a.window)  # the measurement window itself
        dt = time.time() - t0
        cpu = {p: (proc_cpu_s(c.pid(p)) - cpu0[p]) * 1000 / dt for p in names}
        turns = {p: ((c.ctl_json(p, "stats") or {}).get("study", {}).get("turns", 0) - turns0[p]) / dt
                 for p in names}
        st = c.ctl_json("p0", "status", sid) or {"trials": []}
        still = sum(t["state"] == "running" for t in st["trials"])
        if still != 8:
            raise RuntimeError(f"{still} trials running at the window's end, not 8 (--trial-s too short)")
        return {"cpu_ms_per_s": {p: round(v, 2) for p, v in cpu.items()},
                "median_cpu_ms_per_s": round(statistics.median(cpu.values()), 2),
                "turns_per_s": round(statistics.median(turns.values()), 1),
                "window_s": round(dt, 1), "loadavg_end": loadavg()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--trial-s", type=float, default=40.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    meds = []
    for _ in range(a.runs):
        r = run_one(a)
        meds.append(r["median_cpu_ms_per_s"])
        print(json.dumps(r), flush=True)
    print(json.dumps({"summary": {"median_cpu_ms_per_s": statistics.median(meds), "runs": meds}}))


if __name__ == "__main__":
    main()
