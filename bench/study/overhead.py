#!/usr/bin/env python3
"""Scheduling overhead: no-op trials, cluster-wide trials per second,
Starling against Optuna and Ray Tune in the same run on the same machine.

  starling        4 local peers (--slots each), a random-search FIFO study
                  of 1-epoch command trials that print their one report
                  (`echo`), timed from `peerctl submit` until the study is
                  finished on the submitting peer; peer CPU per trial =
                  utime+stime of all peers (not their children) / trials
  optuna-sqlite   4 worker processes, RandomSampler, one SQLite file
  optuna-journal  the same on JournalFileBackend (a shared journal file)
  ray             Ray Tune, a head and 3 worker nodes (ray.cluster_utils:
                  separate raylets on loopback, 1 CPU each), function
                  trainables that return at once

Optuna workers import and connect first, then wait on a barrier: the
clock starts when the barrier opens and stops when the last worker ends.
A trial is lost if it is not complete at the end (left RUNNING, or never
run because a worker crashed). Prints one JSON line per side.

    overhead.py --build BUILD [--sides starling,optuna-sqlite,...]
                [--trials 1000] [--ray-trials 200] [--slots 4]
"""
import argparse, json, multiprocessing as mp, os, shutil, sys, tempfile, time, traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, proc_cpu_s, proc_hwm_mb, proc_rss_mb, loadavg

NOOP_CMD = "echo '{{\"epoch\": 1, \"score\": {x}}}'"


def noop_spec(name, trials, slots):
    return {
        "name": name, "seed": 1,
        "trainer": {"type": "command", "command": NOOP_CMD, "timeout_s": 60},
        "search_space": {"x": {"type": "real", "low": 0.0, "high": 1.0}},
        "searcher": {"type": "random"},
        "scheduler": {"type": "fifo", "epochs": 1},
        "objectives": [{"metric": "score", "goal": "max"}],
        "budget": {"trials": trials}, "concurrency": slots, "retries": 0,
    }


def run_starling(a, trials):
    with Cluster(a.build, 4, extra=["--slots", str(a.slots)], tag="overhead") as c:
        c.wait("the peers converge", c.converged, 60, 0.2)
        # A peer holds claims back for a second after it joins, to catch up
        # (a replica restored after kill -9 may show claims others have
        # since taken); the clock starts once every peer is past that, as
        # Optuna's starts once its workers are connected.
        c.wait("the peers to be ready to claim", c.ready, 60, 0.05)
        pids = c.pids()
        cpu0 = sum(proc_cpu_s(p) for p in pids)
        t0 = time.time()
        sid = c.submit("p0", noop_spec("noop", trials, a.slots))

        rss = {}

        def sample():
            for n in c.names:
                rss[n] = max(rss.get(n, 0.0), proc_rss_mb(c.pid(n)))
        # the end: the finished key arriving on p0 (one watch, not a
        # peerctl process every 20 ms)
        t1 = c.wait_key("p0", f"study/{sid}/finished", 900, 0.02, sample)
        dt = t1 - t0
        cpu = sum(proc_cpu_s(p) for p in pids) - cpu0
        hwm = {n: round(proc_hwm_mb(c.pid(n)), 1) for n in c.names}
        st = c.status("p0", sid)
        states = {}
        for t in st["trials"]:
            states[t["state"]] = states.get(t["state"], 0) + 1
        done = states.get("done", 0)
        return {"side": "starling", "trials": trials, "seconds": round(dt, 3),
                "trials_per_s": round(done / dt, 1), "completed": done,
                "lost": trials - done, "states": states,
                "peer_cpu_ms_per_trial": round(1000 * cpu / trials, 3),
                "peer_rss_max_mb": round(max(rss.values()), 1), "peer_vmhwm_mb": hwm,
                "setup": f"4 peers, --slots {a.slots}, default timers"}


# ---- Optuna ----

def optuna_storage(kind, path):
    import optuna
    if kind == "sqlite":
        return optuna.storages.RDBStorage(f"sqlite:///{path}",
                                          engine_kwargs={"connect_args": {"timeout": 60}})
    from optuna.storages.journal import JournalFileBackend
    return optuna.storages.JournalStorage(JournalFileBackend(path))


def optuna_worker(kind, path, n, barrier, errq):
    try:
        import optuna
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        study = optuna.load_study(study_name="noop", storage=optuna_storage(kind, path),
                                  sampler=optuna.samplers.RandomSampler())
        barrier.wait()
        study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=n)
    except Exception as e:
        errq.put(f"{type(e).__name__}: {e}".splitlines()[0][:300])
        raise


def run_optuna(a, kind, trials):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    d = tempfile.mkdtemp(prefix="sl-bench-optuna.")
    try:
        path = os.path.join(d, "study.db" if kind == "sqlite" else "journal.log")
        optuna.create_study(study_name="noop", storage=optuna_storage(kind, path),
                            direction="maximize")
        ctx = mp.get_context("spawn")
        barrier, errq = ctx.Barrier(5), ctx.Queue()
        per = [trials // 4 + (1 if i < trials % 4 else 0) for i in range(4)]
        ps = [ctx.Process(target=optuna_worker, args=(kind, path, per[i], barrier, errq))
              for i in range(4)]
        for p in ps:
            p.start()
        barrier.wait(timeout=120)
        t0 = time.time()
        for p in ps:
            p.join(timeout=900)
        dt = time.time() - t0
        crashed = sum(1 for p in ps if p.exitcode != 0)
        for p in ps:
            if p.is_alive():
                p.kill()
        errors = []
        while not errq.empty():
            errors.append(errq.get())
        st = optuna.load_study(study_name="noop", storage=optuna_storage(kind, path))
        states = {}
        for t in st.get_trials(deepcopy=False):
            states[t.state.name] = states.get(t.state.name, 0) + 1
        done = states.get("COMPLETE", 0)
        return {"side": f"optuna-{kind}", "trials": trials, "seconds": round(dt, 3),
                "trials_per_s": round(done / dt, 1), "completed": done,
                "lost": trials - done, "states": states, "workers_crashed": crashed,
                "errors": errors[:3],
                "setup": f"optuna {optuna.__version__}, 4 processes, RandomSampler"}
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- Ray Tune ----

def run_ray(a, trials):
    import ray
    from ray import tune
    from ray.cluster_utils import Cluster as RayCluster
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    cl = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for _ in range(3):
            cl.add_node(num_cpus=1)
        ray.init(address=cl.address, logging_level="ERROR", log_to_driver=False)
        cl.wait_for_nodes()
        nodes = len([n for n in ray.nodes() if n["Alive"]])
        store = tempfile.mkdtemp(prefix="sl-bench-ray.")

        def noop(config):
            return {"score": config["x"]}
        tuner = tune.Tuner(noop, param_space={"x": tune.uniform(0.0, 1.0)},
                           tune_config=tune.TuneConfig(num_samples=trials, metric="score",
                                                       mode="max", reuse_actors=True),
                           run_config=tune.RunConfig(storage_path=store, name="noop",
                                                     verbose=0))
        t0 = time.time()
        grid = tuner.fit()
        dt = time.time() - t0
        ok = sum(1 for r in grid if r.error is None and r.metrics and "score" in r.metrics)
        shutil.rmtree(store, ignore_errors=True)
        return {"side": "ray", "trials": trials, "seconds": round(dt, 3),
                "trials_per_s": round(ok / dt, 1), "completed": ok, "lost": trials - ok,
                "setup": f"ray {ray.__version__}, ray.cluster_utils: head + 3 worker nodes "
                         f"({nodes} alive), 1 CPU each, a trial takes 1 CPU, reuse_actors=True"}
    finally:
        try:
            ray.shutdown()
        except Exception:
            pass
        cl.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--sides", default="starling,optuna-sqlite,optuna-journal,ray")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--ray-trials", type=int, default=200)
    ap.add_argument("--slots", type=int, default=4)
    a = ap.parse_args()
    for side in a.sides.split(","):
        load = loadavg()
        try:
            if side == "starling":
                r = run_starling(a, a.trials)
            elif side.startswith("optuna-"):
                r = run_optuna(a, side.split("-", 1)[1], a.trials)
            elif side == "ray":
                r = run_ray(a, a.ray_trials)
            else:
                raise SystemExit(f"unknown side {side}")
        except Exception as e:
            traceback.print_exc()
            r = {"side": side, "error": f"{type(e).__name__}: {e}"[:400]}
        r["loadavg_before"] = load
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
