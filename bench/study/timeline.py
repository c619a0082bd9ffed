#!/usr/bin/env python3
"""Where a study's time went, from the peers' logs at info level (a
cluster directory kept by `scaling.py --keep` run with SL_BENCH_LOG=info):
each job's claim (STUDY-CLAIM), start after its restore (STUDY-RUN), end
(STUDY-END) or loss to another claim (STUDY-LOST), the leader's
promotions (STUDY-PROMOTE), and the peers' kills (a log that stops).

    timeline.py DIR [--slots 1] [--json]

Prints: jobs and claims by kind, claims lost to a collision and the slot
time they held, each peer's idle time between jobs while work was open,
promotions made by a trial's owner (which trains on) and by the leader,
the time from a leader's promotion to the claim and from a claim to its
start, how many slots were busy in each second of the study, when each
peer first claimed after the submit, each job's time beyond its epochs
(by how many epochs it ran: its start-up and end cost the intercept, each
epoch's shell the slope), and the time from the last result to the
study's end."""
import argparse, collections, datetime, glob, json, os, re, statistics

LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \w+\s+(STUDY-[A-Z]+|PEER-START)\s+(.*)$")
CLAIM = re.compile(r"trial (\w+): claim epoch (\d+) \((.*), rung (\d+), claimable for (\d+) ms\)")
RUN = re.compile(r"trial (\w+): \[(\S+)\] claim epoch (\d+): rung (\d+), epochs (\d+)\.\.(\d+)")
END = re.compile(r"trial (\w+): claim epoch (\d+): rung (\d+), ended at epoch (\d+) \((.*)\) "
                 r"after (\d+) ms")
LOST = re.compile(r"trial (\w+): claim epoch (\d+) lost to (\S+) at epoch (\d+) after (\d+) ms")
PROMOTE = re.compile(r"trial (\w+): to rung (\d+):")


def seconds(m):
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + int(m[4]) / 1000


def quantiles(v):
    if not v:
        return "none"
    v = sorted(v)
    q = lambda p: v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]
    return (f"n {len(v)}, median {statistics.median(v):.0f}, p90 {q(0.9):.0f}, "
            f"max {v[-1]:.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--epoch-s", type=float, default=0.25, help="the trials' epoch (their sleep)")
    a = ap.parse_args()
    jobs = {}  # (peer, trial, claim epoch) -> dict
    promoted = {}  # (trial, rung) -> first promotion time
    submit = finish = None
    starts = collections.defaultdict(list)  # peer -> PEER-START times
    last_line = {}
    by_owner = 0  # promotions its owner made and trained on
    segs = {}  # (peer, trial, claim epoch) -> (STUDY-RUN time, first epoch) of the run going on
    seg_over = collections.defaultdict(list)  # epochs a run trained -> ms beyond them
    for path in sorted(glob.glob(os.path.join(a.dir, "*.log"))):
        peer = os.path.basename(path)[:-4]
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m:
                    continue
                t, kind, rest = seconds(m), m[5], m[6]
                last_line[peer] = t
                if kind == "PEER-START":
                    starts[peer].append(t)
                elif kind == "STUDY-SUBMIT":
                    submit = t if submit is None else min(submit, t)
                elif kind == "STUDY-FINISH":
                    finish = t if finish is None else min(finish, t)
                elif kind == "STUDY-CLAIM" and (x := CLAIM.search(rest)):
                    j = jobs.setdefault((peer, x[1], int(x[2])), {})
                    j.update(claim=t, how=x[3], rung=int(x[4]), waited=int(x[5]))
                elif kind == "STUDY-RUN" and (x := RUN.search(rest)):
                    j = jobs.setdefault((peer, x[1], int(x[3])), {})
                    if "end" in j:  # its owner promoted it and trains on: one job
                        del j["end"], j["outcome"]
                        j["continued"] = j.get("continued", 0) + 1
                    j.setdefault("run", t)
                    j.update(rung=int(x[4]), target=int(x[6]))
                    j.setdefault("first", int(x[5]))
                    segs[(peer, x[1], int(x[3]))] = (t, int(x[5]))
                elif kind == "STUDY-END" and (x := END.search(rest)):
                    j = jobs.setdefault((peer, x[1], int(x[2])), {})
                    j.update(end=t, outcome=x[5], last=int(x[4]))
                    sg = segs.pop((peer, x[1], int(x[2])), None)
                    if sg and x[5] in ("done", "paused") and int(x[4]) >= sg[1]:
                        n_ep = int(x[4]) - sg[1] + 1
                        seg_over[n_ep].append(1000 * (t - sg[0] - n_ep * a.epoch_s))
                elif kind == "STUDY-LOST" and (x := LOST.search(rest)):
                    j = jobs.setdefault((peer, x[1], int(x[2])), {})
                    j.update(end=t, outcome="lost")
                elif kind == "STUDY-PROMOTE" and (x := PROMOTE.search(rest)):
                    if rest.endswith("(by its owner)"):
                        by_owner += 1
                    else:
                        promoted.setdefault((x[1], int(x[2])), t)
    if submit is None:
        raise SystemExit("no STUDY-SUBMIT in the logs (run the peers with --log-level info)")
    end_t = finish or max(last_line.values())
    # a job with no end: its peer was killed (its log stops) or it ran at the finish
    for (peer, _, _), j in jobs.items():
        if "end" not in j:
            later = [s for s in starts[peer] if s > j.get("claim", j.get("run", 0))]
            j["end"] = min(later) if later else end_t
            j["outcome"] = "killed" if later else "running at the finish"
    out = {"seconds": round(end_t - submit, 2)}
    by_how = collections.Counter(j.get("how", "?") for j in jobs.values())
    by_outcome = collections.Counter(j.get("outcome", "?") for j in jobs.values())
    out["claims_by_kind"] = dict(by_how)
    out["jobs_by_outcome"] = dict(by_outcome)
    slot_s = collections.Counter()
    for j in jobs.values():
        slot_s[j.get("outcome", "?")] += j["end"] - j.get("claim", j.get("run", j["end"]))
    out["slot_seconds_by_outcome"] = {k: round(v, 1) for k, v in slot_s.items()}
    # promotion -> claim (the first claim after it) and claim -> run
    p2c = []
    for (trial, rung), tp in promoted.items():
        cl = [j["claim"] for (p, tr, e), j in jobs.items()
              if tr == trial and j.get("rung") == rung and "claim" in j and j["claim"] >= tp - 0.05]
        if cl:
            p2c.append(1000 * (min(cl) - tp))
    out["promotions_by_owner"] = by_owner
    out["promotions_by_leader"] = len(promoted)
    out["leader_promotion_to_claim_ms"] = quantiles(p2c)
    c2r = [1000 * (j["run"] - j["claim"]) for j in jobs.values() if "run" in j and "claim" in j]
    out["claim_to_run_ms"] = quantiles(c2r)
    c2r_re = [1000 * (j["run"] - j["claim"]) for j in jobs.values()
              if "run" in j and "claim" in j and j.get("first", 1) > 1]
    out["claim_to_run_ms_with_restore"] = quantiles(c2r_re)
    # each peer's gaps between the end of a job and its next claim
    per_peer = collections.defaultdict(list)
    for (peer, _, _), j in jobs.items():
        per_peer[peer].append((j.get("claim", j.get("run")), j["end"]))
    gaps = []
    for peer, iv in per_peer.items():
        iv.sort()
        for (s0, e0), (s1, e1) in zip(iv, iv[1:]):
            if s1 > e0:
                gaps.append(1000 * (s1 - e0))
    out["gap_end_to_next_claim_ms"] = quantiles(gaps)
    # busy slots each second (winning and losing jobs alike)
    n = int(end_t - submit) + 1
    busy = [0.0] * n
    for j in jobs.values():
        s, e = j.get("claim", j.get("run")) - submit, j["end"] - submit
        for k in range(max(0, int(s)), min(n, int(e) + 1)):
            busy[k] += max(0.0, min(e, k + 1) - max(s, k))
    out["busy_slots_each_second"] = [round(b, 1) for b in busy]
    first_rung = collections.defaultdict(lambda: None)
    for j in jobs.values():
        if j.get("outcome") in ("paused", "done"):
            r = j.get("rung", 0)
            first_rung[r] = max(first_rung[r] or 0, j["end"] - submit)
    out["last_result_at_rung_s"] = {r: round(v, 2) for r, v in sorted(first_rung.items())}
    # the start: each peer's first claim after the submit
    firsts = {}
    for (peer, _, _), j in jobs.items():
        if "claim" in j:
            firsts[peer] = min(firsts.get(peer, j["claim"]), j["claim"])
    out["first_claim_after_submit_ms"] = quantiles([1000 * (t - submit) for t in firsts.values()])
    # a run of n epochs (STUDY-RUN to STUDY-END, done or paused): its time
    # beyond n epochs; a straight line through the medians by n gives the
    # cost a run (intercept) and an epoch (slope)
    out["run_overhead_ms_by_epochs"] = {n: quantiles(v) for n, v in sorted(seg_over.items())}
    med = {n: statistics.median(v) for n, v in seg_over.items() if len(v) >= 3}
    if len(med) >= 2:
        xs, ys = list(med), [med[n] for n in med]
        mx, my = statistics.mean(xs), statistics.mean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        out["run_overhead_fit_ms"] = {"a_run": round(my - slope * mx, 1),
                                      "an_epoch": round(slope, 1)}
    # the end: the last result (a job done) to the study's end
    last_done = max((j["end"] for j in jobs.values() if j.get("outcome") == "done"), default=None)
    if finish is not None and last_done is not None:
        out["last_result_to_finish_ms"] = round(1000 * (finish - last_done))
    if a.json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
