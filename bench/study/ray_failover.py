#!/usr/bin/env python3
"""Ray Tune's side of the failover benchmark: what Tune does when the node
running a trial is killed, and when the head node is killed.

A head (no CPUs: trials run on workers) and 4 worker nodes of 1 CPU each
(3 trials: a node is free to resume on, as for Starling),
from ray.cluster_utils (separate raylets on loopback: the closest to a
multi-node cluster on one 2-core machine). One Tune run of 3 trials, each
a function trainable that trains epochs of --epoch-s seconds (a sleep)
and reports a checkpoint after each (tune.report(..., checkpoint=...)),
resuming from tune.get_checkpoint(); FailureConfig(max_failures=5). Each
start of a trial appends `start WALL TRIAL NODE FROM_EPOCH` to an events
file, like bench/study/trial.py.

  worker kill (--worker-kills N times): kill -9 the processes of the node
    running a trial past epoch 2 (remove_node(allow_graceful=False)), time
    until the trial starts again elsewhere and from which epoch, then add
    a fresh node.
  head kill: kill -9 the head node's processes (GCS, raylet), then watch
    for --head-wait seconds: does any trial start again or report, does
    fit() return or raise?

Prints one line per event, and a JSON summary before the head is killed
and again after (the driver, Tune's controller, may die with the head:
bench/study/run records its exit status)."""
import argparse, json, os, shutil, statistics, sys, tempfile, threading, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker-kills", type=int, default=3)
    ap.add_argument("--epoch-s", type=float, default=0.5)
    ap.add_argument("--head-wait", type=float, default=60)
    ap.add_argument("--resume-wait", type=float, default=90)
    a = ap.parse_args()

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    import ray
    from ray import tune
    from ray.cluster_utils import Cluster as RayCluster

    work = tempfile.mkdtemp(prefix="sl-bench-rayfo.")
    events = os.path.join(work, "events")
    epoch_s = a.epoch_s

    def trainable(config):
        import json as j, os as o, time as t, tempfile as tf
        import ray as r
        from ray import tune as tn
        start = 0
        ck = tn.get_checkpoint()
        if ck:
            with ck.as_directory() as d:
                with open(o.path.join(d, "ck.json")) as f:
                    start = j.load(f)["epoch"]
        trial = tn.get_context().get_trial_id()
        node = r.get_runtime_context().get_node_id()[:12]
        fd = o.open(config["events"], o.O_WRONLY | o.O_APPEND | o.O_CREAT, 0o644)
        o.write(fd, f"start {t.time():.3f} {trial} {node} {start}\n".encode())
        o.close(fd)
        for epoch in range(start + 1, 100000):
            t.sleep(config["epoch_s"])
            d = tf.mkdtemp()
            with open(o.path.join(d, "ck.json"), "w") as f:
                j.dump({"epoch": epoch}, f)
            tn.report({"epoch": epoch, "score": epoch * config["x"]},
                      checkpoint=tn.Checkpoint.from_directory(d))

    cl = RayCluster(initialize_head=True, head_node_args={"num_cpus": 0})
    out = {"setup": "ray.cluster_utils: head (0 CPUs) + 4 worker nodes of 1 CPU, "
                    "3 trials (a spare node to resume on), a checkpoint every epoch, FailureConfig(max_failures=5)"}
    try:
        nodes = [cl.add_node(num_cpus=1) for _ in range(4)]
        ray.init(address=cl.address, logging_level="ERROR", log_to_driver=False)
        cl.wait_for_nodes()
        out["ray"] = ray.__version__
        tuner = tune.Tuner(
            trainable,
            param_space={"x": tune.grid_search([0.1, 0.2, 0.3]), "events": events,
                         "epoch_s": epoch_s},
            run_config=tune.RunConfig(storage_path=os.path.join(work, "store"), name="fo",
                                      verbose=0,
                                      failure_config=tune.FailureConfig(max_failures=5)))
        fit = {}

        def run():
            try:
                fit["grid"] = tuner.fit()
            except BaseException as e:  # what Tune does when the head dies
                fit["error"] = f"{type(e).__name__}: {e}"[:300]
            fit["end"] = time.time()
        th = threading.Thread(target=run, daemon=True)
        th.start()

        def read_events():
            try:
                with open(events) as f:
                    return [l.split() for l in f if l.startswith("start ")]
            except FileNotFoundError:
                return []

        def wait(what, fn, timeout, every=0.05):
            end = time.time() + timeout
            while time.time() < end:
                r = fn()
                if r:
                    return r
                time.sleep(every)
            return None

        node_of = {n.node_id[:12]: n for n in nodes}
        times, froms = [], []
        for k in range(a.worker_kills):
            # a trial past epoch 2 on a worker node (its latest start, then 2.5 epochs)
            if not wait("3 trials started", lambda: len({e[2] for e in read_events()}) >= 3,
                        120):
                out["worker_error"] = "trials did not start"
                break
            time.sleep(epoch_s * 3)  # let it pass epoch 2 (it checkpoints every epoch)
            ev = read_events()
            latest = {}
            for e in ev:
                latest[e[2]] = e
            trial, (_, wall, _, node, frm) = sorted(latest.items())[k % len(latest)]
            victim = node_of.get(node)
            if victim is None:
                out["worker_error"] = f"node {node} of trial {trial} not found"
                break
            t_kill = time.time()
            cl.remove_node(victim, allow_graceful=False)
            nodes.remove(victim)

            def resumed():
                for e in read_events():
                    if e[2] == trial and float(e[1]) > t_kill:
                        return e
                return None
            e = wait(f"{trial} to start again", resumed, a.resume_wait)
            if not e:
                print(f"worker kill {k + 1}: trial {trial} did not start again within "
                      f"{a.resume_wait:.0f} s",
                      flush=True)
                times.append(None)
            else:
                dt = float(e[1]) - t_kill
                times.append(dt)
                froms.append(int(e[4]))
                print(f"worker kill {k + 1}: killed node {node} running {trial}; it started "
                      f"again on node {e[3]} from epoch {e[4]} after {dt:.2f} s", flush=True)
            n = cl.add_node(num_cpus=1)
            nodes.append(n)
            node_of[n.node_id[:12]] = n
            cl.wait_for_nodes()
        ok = [x for x in times if x is not None]
        out["worker_kill"] = {
            "runs": len(times), "resumed": len(ok),
            "median_s": round(statistics.median(ok), 3) if ok else None,
            "max_s": round(max(ok), 3) if ok else None,
            "from_epochs": froms, "all_s": [None if x is None else round(x, 3) for x in times]}

        # printed now: when the head is gone the driver itself may not live on
        print(json.dumps(out), flush=True)
        # the head
        time.sleep(epoch_s * 3)
        n_before = len(read_events())
        t_kill = time.time()
        # (remove_node refuses the node the driver is connected to: kill its processes)
        cl.head_node.kill_all_processes(check_alive=False, allow_graceful=False)
        th.join(a.head_wait)
        after = read_events()[n_before:]
        out["head_kill"] = {
            "waited_s": round(time.time() - t_kill, 1),
            "trial_starts_after": len(after),
            "fit_returned": "end" in fit,
            "fit_error": fit.get("error"),
            "fit_after_s": round(fit["end"] - t_kill, 2) if "end" in fit else None,
        }
        print(f"head kill: {json.dumps(out['head_kill'])}", flush=True)
        print(json.dumps(out), flush=True)
    finally:
        try:
            ray.shutdown()
        except Exception:
            pass
        try:
            cl.shutdown()
        except Exception:
            pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
