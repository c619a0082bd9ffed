#!/usr/bin/env python3
"""The runtime's own CPU while a study's trials run: what it takes from
the training beside it. 4 peers, 2 slots each, a FIFO study of 8
one-epoch command trials that sleep --trial-s seconds (so every slot is
busy and nothing changes for a while); once all 8 run, the peers' CPU
(utime + stime, not their children's) is sampled over --window seconds.
The anchor, Ray Tune (`ray[tune]` from PyPI), runs the same: a head and 3
worker nodes of 2 CPUs each (ray.cluster_utils, on loopback), 8 function
trials that sleep; its CPU is that of every process of the Ray cluster
and of the driver (Tune's controller), the sleeping trials' workers
included (their runtime's threads, not training).
Prints, for each side, ms of CPU a second a node (the side's total / 4),
and for Starling each peer's and the study loop's turns a second.

    busy_cpu.py --build BUILD [--sides starling,ray] [--window 10]
                [--trial-s 40] [--runs 3]"""
import argparse, json, os, shutil, statistics, sys, tempfile, time

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
        return {"side": "starling",
                "per_node_ms_per_s": round(sum(cpu.values()) / len(cpu), 2),
                "cpu_ms_per_s": {p: round(v, 2) for p, v in cpu.items()},
                "median_cpu_ms_per_s": round(statistics.median(cpu.values()), 2),
                "turns_per_s": round(statistics.median(turns.values()), 1),
                "window_s": round(dt, 1), "loadavg_end": loadavg()}


def cpu_s(pid):
    """utime + stime of a process, or None once it is gone."""
    try:
        return proc_cpu_s(pid)
    except OSError:
        return None


def descendants(pid):
    """Every process below `pid` (Ray's raylets, GCS, workers: all
    started by the driver)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


# Tune's driver, in a process of its own (it is part of what Ray runs;
# in a thread it outlived ray.shutdown and connected again)
RAY_DRIVER = """
import os, sys, time
import ray
from ray import tune
address, marks, store, trial_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ray.init(address=address, logging_level="ERROR", log_to_driver=False)

def trial(config):
    open(os.path.join(marks, str(config["i"])), "w").close()
    time.sleep(trial_s)
    return {"x": config["i"]}

tune.Tuner(trial, param_space={"i": tune.grid_search(list(range(8)))},
           tune_config=tune.TuneConfig(max_concurrent_trials=8),
           run_config=tune.RunConfig(storage_path=store, name="busy", verbose=0)).fit()
"""


def run_ray(a):
    import subprocess
    import ray
    from ray.cluster_utils import Cluster as RayCluster
    env = dict(os.environ, RAY_AIR_NEW_OUTPUT="0", TUNE_DISABLE_AUTO_CALLBACK_LOGGERS="1")
    marks = tempfile.mkdtemp(prefix="sl-bench-busy-ray.")
    store = tempfile.mkdtemp(prefix="sl-bench-busy-ray-store.")
    cl = RayCluster(initialize_head=True, head_node_args={"num_cpus": 2})
    driver = None
    try:
        for _ in range(3):
            cl.add_node(num_cpus=2)
        ray.init(address=cl.address, logging_level="ERROR", log_to_driver=False)
        cl.wait_for_nodes()
        ray.shutdown()  # (the driver below connects on its own)
        driver = subprocess.Popen([sys.executable, "-c", RAY_DRIVER, cl.address, marks, store,
                                   str(a.trial_s)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(os.listdir(marks)) < 8:  # polling the trials' start marks
            if time.time() > deadline or driver.poll() is not None:
                raise RuntimeError(f"{len(os.listdir(marks))} of 8 Ray trials started")
            time.sleep(0.2)
        time.sleep(1.0)  # as for Starling: the starts settle before the window opens
        procs = descendants(os.getpid())
        cpu0 = {p: cpu_s(p) for p in procs}
        t0 = time.time()
        time.sleep(a.window)  # the measurement window itself
        dt = time.time() - t0
        used = 0.0
        for p in procs:
            end = cpu_s(p)
            if end is not None and cpu0[p] is not None:
                used += end - cpu0[p]
        if len(os.listdir(marks)) != 8 or driver.poll() is not None:
            raise RuntimeError("a Ray trial failed and was retried, or the driver ended")
        return {"side": "ray", "per_node_ms_per_s": round(used * 1000 / dt / 4, 2),
                "processes": len(procs), "window_s": round(dt, 1), "loadavg_end": loadavg(),
                "setup": f"ray {ray.__version__}, ray.cluster_utils: head + 3 worker nodes, "
                         "2 CPUs each, 8 function trials that sleep; Tune's driver counted"}
    finally:
        if driver and driver.poll() is None:
            driver.kill()
            driver.wait()
        cl.shutdown()
        shutil.rmtree(marks, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--sides", default="starling,ray")
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--trial-s", type=float, default=40.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    per_node = {}
    for _ in range(a.runs):
        for side in a.sides.split(","):
            try:
                r = run_one(a) if side == "starling" else run_ray(a)
            except Exception as e:
                r = {"side": side, "error": f"{type(e).__name__}: {e}"[:400]}
            per_node.setdefault(side, []).append(r.get("per_node_ms_per_s"))
            print(json.dumps(r), flush=True)
    summary = {side: {"median_per_node_ms_per_s": statistics.median(v for v in vs if v is not None)
                      if any(v is not None for v in vs) else None, "runs": vs}
               for side, vs in per_node.items()}
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()
