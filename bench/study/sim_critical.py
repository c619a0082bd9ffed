#!/usr/bin/env python3
"""Where the scale simulator's makespan went, on its critical path: the
trials that finished last, from the events of `SL_SCALE_TRACE=FILE
tests/sim_study_scale_test` (bench/results/sim.md).

    sim_critical.py TRACE [--last 3] [--epoch-ms 250]

For each of the `--last` trials to finish (the last one ends the study):
when it first started (the fresh trial's wait), the time it trained
(starts to the end of each job), the work a kill threw away (from the
last epoch's end to the kill), and the time it waited between its jobs,
by what ended the job before (the last of its jobs, where two peers
ran it at once): a kill (membership's detection, the
takeover and the new owner's catch-up), a release at a rung's end (the
wait for a promotion), or a claim lost to another. Then the whole
fleet's kills that hit a trial in training."""
import argparse, collections, re

EV = re.compile(r"^(\d+) ([A-Z]) (-?\d+) (\S+)(.*)$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--last", type=int, default=3)
    ap.add_argument("--epoch-ms", type=int, default=250)
    a = ap.parse_args()
    events = collections.defaultdict(list)  # trial -> [(t, kind, peer, rest)]
    done = {}
    kills_busy = 0
    for line in open(a.trace):
        m = EV.match(line.rstrip("\n"))
        if not m:
            continue
        t, kind, trial, peer, rest = int(m[1]), m[2], int(m[3]), m[4], m[5]
        if trial < 0:
            continue
        events[trial].append((t, kind, peer, rest))
        if kind == "D":
            done[trial] = t
        if kind == "K":
            kills_busy += 1
    last = sorted(done, key=lambda k: done[k])[-a.last:][::-1]
    for trial in last:
        ev = events[trial]
        first = next((t for t, k, _, _ in ev if k == "S"), None)
        trained = lost = epochs = 0
        waits = collections.Counter()
        jobs = {}  # peer -> [job start, its last epoch's end or start]
        since = None  # no peer on it since (None: some peer is)
        why = None  # what ended the last job before that
        for t, k, peer, rest in ev:
            if k == "S":
                if not jobs and since is not None:
                    waits[why] += t - since
                jobs[peer] = [t, t]
            elif k == "E" and peer in jobs:
                epochs += 1
                jobs[peer][1] = t
            elif k in "KXRYD" and peer in jobs:
                start, last = jobs.pop(peer)
                if k == "K":
                    lost += t - last
                if not jobs:
                    trained += t - start
                    since, why = t, {"K": "kill", "X": "claim lost", "R": "rung end",
                                     "Y": "ended", "D": "done"}[k]
        print(f"trial {trial}: done at {done[trial]} ms; first start {first} ms; "
              f"{epochs} epochs reported ({epochs * a.epoch_ms} ms), trained {trained} ms, "
              f"of it thrown away by kills {lost} ms; waits between jobs: "
              + (", ".join(f"{k} {v} ms" for k, v in waits.most_common()) or "none"))
        for t, k, peer, rest in ev:
            if k in "SKXRPL":
                print(f"    {t:6d} {k} {peer}{rest}")
    print(f"kills of a peer in training: {kills_busy}")


if __name__ == "__main__":
    main()
