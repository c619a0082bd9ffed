#!/usr/bin/env python3
"""What asynchronous ASHA itself allows: the scaling benchmark's study
(200 trials, rungs of 1, 3 and 9 epochs of 0.25 s, reduction 3) on N
ideal workers with no overhead and instant decisions: a free worker
resumes an interrupted trial first, else takes the best promotable trial
(highest rung first), else the next fresh one, else waits (Li et al.'s
get_job). Its speed-up at N is the most any runtime can reach on this
workload: the last promotions (3 and 9 epochs) run while most workers
have nothing left to do.

With --churn, a quarter of the workers (N // 4, the last ones) churn as
in scaling.py: each is killed every --churn-period seconds (staggered),
loses the epoch in progress (a checkpoint is kept after each epoch) and
comes back --churn-down seconds later; its trial may be resumed by
another worker --stall-s after the kill (0: an oracle runtime that knows
of the kill at once). That is the bound under the benchmark's churn.

--scores FILE takes the trials' scores (one a line, in proposal order)
instead of drawing them: the scaling benchmark's own study (its seed)
rather than an average study. Get them from a finished run's store:
`peerctl keys study/SID/t/` and `peerctl get` of each trial's record
(its "ordinal" and config "q": the score is q x epoch).

--overhead-s and --epoch-s give the workers a cost a job (its start and
end) and a longer epoch: timeline.py's fit of a real run's job times
(run_overhead_fit_ms: a_run, an_epoch) turns into what ASHA allows with
those costs and no other (`--overhead-s A --epoch-s 0.25+E`), the share
of a run's gap that the jobs' own costs explain.

    asha_bound.py [--peers 1,2,4,8,16,32] [--seeds 5] [--overhead-s 0] [--epoch-s 0.25]
                  [--rungs 1,3,9] [--eta 3] [--scores FILE]
                  [--churn] [--churn-period 8] [--churn-down 1] [--stall-s 0]
One JSON line per N: median makespan over seeds (each seed draws the
trials' scores), speed-up and efficiency against the same model's T(1)
(which has no churners)."""
import argparse, heapq, json, random, statistics


def makespan(n, trials=200, rungs=(1, 3, 9), eta=3, epoch_s=0.25, overhead_s=0.0, seed=0,
             scores=None, churn=None):
    """churn: None, or (period_s, down_s, stall_s)."""
    if scores is None:
        rng = random.Random(seed)
        score = [rng.random() for _ in range(trials)]
    else:
        score, trials = scores, len(scores)
    results = [set() for _ in rungs]  # trials with a result at each rung
    rung = {}
    done = {}  # epochs trained (checkpointed)
    paused = set()
    resumable = []  # interrupted trials another worker may take
    fresh = 0
    events = []  # (time, seq, kind, worker, trial, started)
    seq = 0
    idle = list(range(n))
    running = {}  # worker -> (trial, started, seq of its end event)
    t = 0.0

    def push(when, kind, w, i=None, started=0.0):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (when, seq, kind, w, i, started))
        return seq

    def take():
        nonlocal fresh
        if resumable:
            return resumable.pop(0)
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

    cancelled = set()  # end events of jobs killed before they ended
    if churn:
        period, down, stall = churn
        churners = list(range(n - n // 4, n)) if n >= 4 else []
        for k, w in enumerate(churners):
            push(period * (k + 1) / len(churners), "kill", w)
    while True:
        while idle:
            i = take()
            if i is None:
                break
            w = idle.pop(0)
            k = rung[i]
            s = push(t + (rungs[k] - done[i]) * epoch_s + overhead_s, "end", w, i, t)
            running[w] = (i, t, s)
        # nothing runs, waits to resume or is left to start: done (a paused
        # trial can become promotable only through a new result)
        if not running and not resumable and fresh >= trials and not any(
                e[2] == "stalled" for e in events):
            return t
        t, s, kind, w, i, started = heapq.heappop(events)
        if kind == "end":
            if s in cancelled:
                continue
            del running[w]
            idle.append(w)
            k = rung[i]
            done[i] = rungs[k]
            results[k].add(i)
            if k < len(rungs) - 1:
                paused.add(i)
        elif kind == "kill":
            if w in running:
                j, began, end_seq = running.pop(w)
                cancelled.add(end_seq)
                done[j] += int((t - began - overhead_s) / epoch_s + 1e-9) if t > began + overhead_s else 0
                done[j] = min(done[j], rungs[rung[j]])
                push(t + stall, "stalled", w, j)
            else:
                idle.remove(w)
            push(t + down, "back", w)
        elif kind == "back":
            idle.append(w)
            push(t + period, "kill", w)
        elif kind == "stalled":
            resumable.append(i)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="1,2,4,8,16,32")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--overhead-s", type=float, default=0.0, help="a job's own cost")
    ap.add_argument("--epoch-s", type=float, default=0.25, help="an epoch's time")
    ap.add_argument("--rungs", default="1,3,9", help="epochs at each rung (another ladder)")
    ap.add_argument("--eta", type=int, default=3, help="reduction factor")
    ap.add_argument("--scores", help="the trials' scores, one a line in proposal order")
    ap.add_argument("--churn", action="store_true", help="a quarter of the workers churn")
    ap.add_argument("--churn-period", type=float, default=8.0)
    ap.add_argument("--churn-down", type=float, default=1.0)
    ap.add_argument("--stall-s", type=float, default=0.0,
                    help="from a kill until another worker may resume its trial")
    a = ap.parse_args()
    ns = [int(x) for x in a.peers.split(",")]
    rungs = tuple(int(x) for x in a.rungs.split(","))
    scores = [float(x) for x in open(a.scores).read().split()] if a.scores else None
    seeds = range(1 if scores else a.seeds)
    churn = (a.churn_period, a.churn_down, a.stall_s) if a.churn else None
    run = lambda n, s, c: makespan(n, rungs=rungs, eta=a.eta, epoch_s=a.epoch_s,
                                   overhead_s=a.overhead_s, seed=s, scores=scores, churn=c)
    t1 = statistics.median(run(1, s, None) for s in seeds)
    for n in ns:
        tn = statistics.median(run(n, s, churn) for s in seeds)
        print(json.dumps({"peers": n, "rungs": a.rungs, "eta": a.eta, "seconds": round(tn, 2),
                          "speedup": round(t1 / tn, 2), "efficiency": round(t1 / tn / n, 3),
                          "overhead_s": a.overhead_s, "epoch_s": a.epoch_s, "scores": a.scores or f"{a.seeds} seeds",
                          "churn": list(churn) if churn else None}))


if __name__ == "__main__":
    main()
