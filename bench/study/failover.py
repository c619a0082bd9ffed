#!/usr/bin/env python3
"""Failover benchmark: 4 peers with the daemon's default timers and two
slots each run a FIFO study of 4 long command trials
(bench/study/trial.py: an epoch every 0.5 s, a checkpoint after each), so
the fleet has free slots to resume on, as an elastic job keeps spare
capacity. Repeatedly: pick a trial that is past its second epoch (its
owner the least killed so far), kill -9 its owner, and time from the kill
until the trial starts again on another peer from its checkpoint (the
trial's own start record: wall time, peer, the epoch it resumed from);
then restart the killed peer and wait until all four see each other again.

    failover.py --build BUILD [--runs 12] [--peers 4]
Prints one line per run and a summary (median, p99 = the largest of fewer
than 100 runs) as JSON on the last line."""
import argparse, json, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--epoch-s", type=float, default=0.5)
    ap.add_argument("--timers", default="", help="extra peer flags (default: the daemon's defaults)")
    ap.add_argument("--keep", action="store_true", help="keep the cluster directory (logs)")
    a = ap.parse_args()

    c = Cluster(a.build, a.peers, extra=a.timers.split() + ["--slots", "2"], tag="failover",
                keep=a.keep)
    events = f"{c.dir}/events"
    spec = {
        "name": "failover", "seed": 1,
        "trainer": {"type": "command", "timeout_s": 3600,
                    "command": f"python3 {HERE}/trial.py --epochs 2000 --seconds {a.epoch_s} "
                               f"--events {events} --x {{x}}"},
        "search_space": {"x": {"type": "real", "low": 0.0, "high": 1.0}},
        "searcher": {"type": "random"},
        "scheduler": {"type": "fifo", "epochs": 2000},
        "objectives": [{"metric": "score", "goal": "max"}],
        "budget": {"trials": a.peers},
        "checkpoint_every": 1, "concurrency": 1, "retries": 2,
    }
    with open(f"{c.dir}/spec.json", "w") as f:
        json.dump(spec, f)
    c.wait("the peers converge", c.converged, 60)
    sid = c.ctl("p0", "submit", f"{c.dir}/spec.json").strip()
    print(f"study {sid}, {a.peers} peers, default timers{' + ' + a.timers if a.timers else ''}",
          flush=True)

    kills = {p: 0 for p in c.names}
    results = []
    no_ckpt = 0
    for run in range(a.runs):
        # every trial running, and one past its second epoch (a checkpoint replicated)
        def pick():
            obs = next(p for p in c.names if p in c.proc)
            st = c.ctl_json(obs, "status", sid)
            if not st:
                return None
            running = [t for t in st["trials"] if t["state"] == "running"]
            if len(running) < a.peers:
                return None
            cands = [t for t in running if t["epoch"] >= 2 and t.get("checkpoint", 0) >= 1]
            if not cands:
                return None
            cands.sort(key=lambda t: (kills[t["owner"]], t["owner"]))
            return cands[0]
        t = c.wait("a running trial past epoch 2 on every peer", pick, 120)
        victim, trial, ep = t["owner"], t["trial"], t["epoch"]
        t_kill = time.time()
        c.kill9(victim)
        kills[victim] += 1

        def resumed():
            try:
                with open(events) as f:
                    for line in f:
                        _, wall, tr, peer, frm = line.split()
                        if tr == trial and float(wall) > t_kill and peer != victim:
                            return float(wall), peer, int(frm)
            except FileNotFoundError:
                pass
            return None
        wall, peer, frm = c.wait(f"{trial} to start again", resumed, 60, every=0.02)
        dt = wall - t_kill
        results.append(dt)
        print(f"run {run + 1}: killed {victim} running {trial} at epoch {ep}; "
              f"resumed on {peer} from epoch {frm} after {dt:.2f} s", flush=True)
        if frm < 1:
            no_ckpt += 1
            print(f"  (resumed from epoch {frm}: no checkpoint used)", flush=True)
        c.start(victim, join=c.addr(next(p for p in c.names if p in c.proc)))
        c.wait("the killed peer rejoins", c.converged, 60, every=0.2)

    s = sorted(results)
    p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
    summary = {"runs": len(s), "median_s": round(statistics.median(s), 3),
               "p99_s": round(p99, 3), "min_s": round(s[0], 3), "max_s": round(s[-1], 3), "resumed_without_checkpoint": no_ckpt,
               "all_s": [round(x, 3) for x in results]}
    print(json.dumps(summary), flush=True)
    c.close()


if __name__ == "__main__":
    main()
