#!/usr/bin/env python3
"""Scaling: the time to finish a 200-trial ASHA study (min 1, max 9 epochs,
reduction 3) with N real peers on loopback, one slot each (one "GPU" a
peer), with simulated training time: a shell command trial that sleeps
--epoch-s per epoch, reports a score that depends on its config, and
checkpoints its epoch after each (so a promoted or preempted trial
resumes). While it runs, a quarter of the peers (N // 4) churn: each is
killed with kill -9 every --churn-period seconds (staggered) and
restarted --churn-down seconds later. Speed-up is T(1 peer) / T(N).
Each line also gives ASHA's own bound on this very study (asha_bound.py
with the trials' scores read back from the store): the makespan of ideal
workers, without churn and with this churn, and its efficiency; the
summary gives the share of that bound each N reached. It gives too what
the run cost the peers: the study's and the store's counters totalled
over the peers alive at the end (group commits: each a sync and a DELTA
to every member), and the median CPU seconds of a peer never killed, its
trials' shells not counted (peer_cpu_s_median).

    scaling.py --build BUILD [--peers 1,2,4,8,16] [--trials 200]
               [--epoch-s 0.25] [--churn-period 8] [--churn-down 1]
One JSON line per N; a summary line last."""
import argparse, json, os, random, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, loadavg, proc_cpu_s
import asha_bound

# sleeps an epoch, reports, then checkpoints (the peer replicates the
# checkpoint directory one report behind, as for any command trial). The
# checkpoint is written whole, to ck.tmp and renamed (the peer skips
# names with .tmp): the peer may read the directory while the command
# writes it, and `echo $e > ck` let it read an empty ck, which a promoted
# trial then resumed from and failed on three times in a row
# (a Starling template: {q} is the parameter, {{ and }} literal braces)
TRIAL = ('e=$(cat "$STARLING_CHECKPOINT_DIR/ck" 2>/dev/null || echo 0); '
         'while [ $e -lt $STARLING_EPOCHS ]; do sleep SECONDS; e=$((e+1)); '
         'echo "{{\\"epoch\\": $e, \\"score\\": $(( {q} * e ))}}"; '
         'echo $e > "$STARLING_CHECKPOINT_DIR/ck.tmp"; '
         'mv "$STARLING_CHECKPOINT_DIR/ck.tmp" "$STARLING_CHECKPOINT_DIR/ck"; done')


def spec(trials, epoch_s):
    return {
        "name": "scaling", "seed": 3,
        "trainer": {"type": "command", "command": TRIAL.replace("SECONDS", str(epoch_s)), "timeout_s": 600},
        "search_space": {"q": {"type": "int", "low": 1, "high": 100000}},
        "searcher": {"type": "random"},
        "scheduler": {"type": "asha", "min_epochs": 1, "max_epochs": 9, "reduction": 3},
        "objectives": [{"metric": "score", "goal": "max"}],
        "budget": {"trials": trials}, "concurrency": 1, "retries": 2, "lease_ms": 5000,
    }


def run_one(a, n):
    churners = [f"p{i}" for i in range(n - n // 4, n)] if n >= 4 else []
    with Cluster(a.build, n, extra=["--slots", "1"], tag=f"scaling{n}", keep=a.keep) as c:
        c.wait("the peers converge", c.converged, 120, 0.3)
        if a.wait_ready:
            c.wait("every peer ready to claim", c.ready, 60, 0.1)
        # the daemons' own CPU (not their trials'): the peers never killed
        steady = [p for p in c.alive_names() if p not in churners]
        cpu0 = {p: proc_cpu_s(c.pid(p)) for p in steady}
        t0 = time.time()
        sid = c.submit("p0", spec(a.trials, a.epoch_s))
        rng = random.Random(n)
        # churn: staggered kill -9 / restart of the churners
        next_kill = {p: t0 + a.churn_period * (k + 1) / max(1, len(churners))
                     for k, p in enumerate(churners)}
        back_at = {}
        kills = 0

        def finished():
            r = c.ctl("p0", "get", f"study/{sid}/finished", check=False, timeout=10)
            return bool(r.strip())
        while not finished():
            now = time.time()
            if now - t0 > a.timeout:
                raise TimeoutError(f"{n} peers: not finished after {a.timeout} s")
            for p in churners:
                if p in c.proc and now >= next_kill[p]:
                    c.kill9(p)
                    kills += 1
                    back_at[p] = now + a.churn_down
                elif p not in c.proc and now >= back_at.get(p, 0):
                    c.start(p, join=c.addr("p0"))
                    next_kill[p] = now + a.churn_period + rng.uniform(-0.5, 0.5)
            time.sleep(0.1)
        dt = time.time() - t0
        cpu = sorted(proc_cpu_s(c.pid(p)) - cpu0[p] for p in steady)
        st = c.ctl_json("p0", "status", sid, timeout=30) or {"trials": []}
        states = {}
        epochs = 0
        for t in st["trials"]:
            states[t["state"]] = states.get(t["state"], 0) + 1
            epochs += t["epoch"]
        # the loop's counters of the peers alive at the end (a killed
        # peer's start again from zero)
        totals, store = {}, {}
        for p in c.alive_names():
            js = c.ctl_json(p, "stats") or {}
            ss = js.get("study", {})
            for k in ("claims", "claims_lost", "jobs_ended", "job_ms", "turns", "turn_us",
                      "writes"):
                totals[k] = totals.get(k, 0) + ss.get(k, 0)
            # what the writes cost the store: group commits (each one sync
            # and one DELTA to every member), syncs, DELTAs applied
            ts = js.get("store", {})
            for k in ("group_commits", "group_writes", "wal_syncs", "pushed", "applied"):
                store[k] = store.get(k, 0) + ts.get(k, 0)
        r = {"peers": n, "churners": len(churners), "kills": kills, "seconds": round(dt, 2),
             "trials": len(st["trials"]), "states": states, "epochs_recorded": epochs,
             "study_stats": totals, "store_stats": store,
             "peer_cpu_s_median": round(cpu[len(cpu) // 2], 3) if cpu else None,
             "loadavg_end": loadavg()}
        r.update(bound(a, n, st["trials"]))
        if a.keep:
            r["dir"] = c.dir
            # the trials' scores in proposal order, for asha_bound.py --scores
            # (with timeline.py's job costs: --overhead-s, --epoch-s)
            with open(os.path.join(c.dir, "scores.txt"), "w") as f:
                for t in sorted(st["trials"], key=lambda t: t["ordinal"]):
                    f.write(f"{t['config']['q']}\n")
        return r


def bound(a, n, trials):
    """What ASHA itself allows on this very study (its trials' scores, in
    proposal order) with n ideal workers, with and without this run's
    churn (an oracle that resumes a killed trial at once): asha_bound.py's
    model. The efficiency of the bound is against the model's own 1-worker
    time, which the shell's per-epoch cost does not inflate."""
    scores = [t["config"]["q"] for t in sorted(trials, key=lambda t: t["ordinal"])]
    if len(scores) != a.trials:
        return {}
    ms = lambda k, churn=None: asha_bound.makespan(k, scores=scores, epoch_s=a.epoch_s,
                                                   churn=churn)
    t1 = ms(1)
    out = {"bound_s": ms(n), "bound_efficiency": round(t1 / ms(n) / n, 3)}
    if n >= 4:
        tc = ms(n, (a.churn_period, a.churn_down, 0.0))
        out.update({"bound_churn_s": tc, "bound_churn_efficiency": round(t1 / tc / n, 3)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--peers", default="1,2,4,8,16")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--epoch-s", type=float, default=0.25)
    ap.add_argument("--churn-period", type=float, default=8.0)
    ap.add_argument("--churn-down", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--wait-ready", action="store_true",
                    help="start the clock once every peer may claim (stats study.ready), as "
                         "overhead.py does, so T(1) holds no lone peer's lease wait")
    ap.add_argument("--keep", action="store_true", help="keep each cluster's directory (logs)")
    a = ap.parse_args()
    rows = []
    for n in [int(x) for x in a.peers.split(",")]:
        try:
            r = run_one(a, n)
        except Exception as e:
            r = {"peers": n, "error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(r)
        print(json.dumps(r), flush=True)
    base = next((r["seconds"] for r in rows if r.get("peers") == 1 and "seconds" in r), None)
    summary = []
    for r in rows:
        if base and "seconds" in r:
            su = base / r["seconds"]
            row = {"peers": r["peers"], "speedup": round(su, 2),
                   "efficiency": round(su / r["peers"], 2)}
            b = r.get("bound_churn_efficiency", r.get("bound_efficiency"))
            if b:
                row["bound_efficiency"] = b
                row["share_of_bound"] = round(su / r["peers"] / b, 2)
            summary.append(row)
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
