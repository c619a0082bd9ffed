#!/usr/bin/env python3
"""What asynchronous ASHA itself allows: the scaling benchmark's study
(200 trials, rungs of 1, 3 and 9 epochs of 0.25 s, reduction 3) on N
ideal workers with no overhead, no churn and instant decisions: a free
worker takes the best promotable trial (highest rung first), else the
next fresh one, else waits (Li et al.'s get_job). Its speed-up at N is
the most any runtime can reach on this workload: the last promotions
(3 and 9 epochs) run while most workers have nothing left to do.

    asha_bound.py [--peers 1,2,4,8,16,32] [--seeds 5] [--overhead-s 0]
                  [--rungs 1,3,9] [--eta 3]
One JSON line per N: median makespan over seeds (each seed draws the
trials' scores), speed-up and efficiency against the same model's T(1)."""
import argparse, heapq, json, random, statistics


def makespan(n, trials=200, rungs=(1, 3, 9), eta=3, epoch_s=0.25, overhead_s=0.0, seed=0):
    rng = random.Random(seed)
    score = [rng.random() for _ in range(trials)]
    results = [set() for _ in rungs]  # trials with a result at each rung
    rung = {}
    done = {}  # epochs trained
    paused = set()
    fresh = 0
    events = []
    free = n
    t = 0.0

    def take():
        nonlocal fresh
        for k in range(len(rungs) - 2, -1, -1):
            ranked = sorted(results[k], key=lambda i: -score[i])[:len(results[k]) // eta]
            for i in ranked:
                if i in paused and rung[i] == k:
                    paused.discard(i)
                    rung[i] = k + 1
                    return i
        if fresh < trials:
            i = fresh
            fresh += 1
            rung[i], done[i] = 0, 0
            return i
        return None

    while True:
        while free:
            i = take()
            if i is None:
                break
            free -= 1
            k = rung[i]
            heapq.heappush(events, (t + (rungs[k] - done[i]) * epoch_s + overhead_s, i))
        if not events:
            return t
        t, i = heapq.heappop(events)
        free += 1
        k = rung[i]
        done[i] = rungs[k]
        results[k].add(i)
        if k < len(rungs) - 1:
            paused.add(i)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="1,2,4,8,16,32")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--overhead-s", type=float, default=0.0)
    ap.add_argument("--rungs", default="1,3,9", help="epochs at each rung (another ladder)")
    ap.add_argument("--eta", type=int, default=3, help="reduction factor")
    a = ap.parse_args()
    ns = [int(x) for x in a.peers.split(",")]
    rungs = tuple(int(x) for x in a.rungs.split(","))
    run = lambda n, s: makespan(n, rungs=rungs, eta=a.eta, overhead_s=a.overhead_s, seed=s)
    t1 = statistics.median(run(1, s) for s in range(a.seeds))
    for n in ns:
        tn = statistics.median(run(n, s) for s in range(a.seeds))
        print(json.dumps({"peers": n, "rungs": a.rungs, "eta": a.eta, "seconds": round(tn, 2),
                          "speedup": round(t1 / tn, 2), "efficiency": round(t1 / tn / n, 3),
                          "overhead_s": a.overhead_s}))


if __name__ == "__main__":
    main()
