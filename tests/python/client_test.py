#!/usr/bin/env python3
"""The Python package against real peers (issue 15): every Client method,
the hex vectors of proto/vectors/ctl_*.txt through starling.wire,
starling.report()/checkpoint_dir() from a command-trainer study, elastic
jobs (a built-in one when Debian's fashion-mnist is there) and
starling.elastic in a command job's script.

Starts two peers of $SL_BUILD_DIR (default build/) in an open cluster with
--allow-commands. Imports nothing from the C side: only python/starling."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import zmq

import starling
from starling import Status, StarlingError, wire

SRC = os.environ.get("SL_SOURCE_DIR", os.getcwd())
BUILD = os.environ.get("SL_BUILD_DIR", os.path.join(SRC, "build"))
PEER = os.path.join(BUILD, "peer")
FAST = "--probe-interval 200 --probe-timeout 100 --suspicion-mult 3 --sync-interval 2000".split()
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def wait_until(pred, what, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                print("ok   " + what, flush=True)
                return True
        except StarlingError:
            pass
        time.sleep(0.1)
    check(False, f"{what} within {timeout:g} s")
    return False


def raises(status, fn, *args):
    try:
        fn(*args)
    except StarlingError as e:
        return e.status == status and e.message != ""
    return False


USED_PORTS = set()


def free_port():
    """A port free on 127.0.0.1 with the one after it (a peer's elastic ring,
    --ring-port, defaults to its gossip port + 1), overlapping no port this
    test took; below 32768, where the kernel picks outgoing ports."""
    for _ in range(500):
        p = 20000 + int.from_bytes(os.urandom(2), "big") % 12000
        if USED_PORTS & {p - 1, p, p + 1}:
            continue
        with socket.socket() as s, socket.socket() as r:
            try:
                s.bind(("127.0.0.1", p))
                r.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        USED_PORTS.update((p, p + 1))
        return p
    raise RuntimeError("no free port")


def vectors():
    def frame(f):
        out = b""
        for seg in ([] if f == "-" else f.split("+")):
            h, _, n = seg.partition("*")
            out += bytes.fromhex(h) * (int(n) if n else 1)
        return out

    d = os.path.join(SRC, "proto", "vectors")
    count = 0
    for fn in sorted(os.listdir(d)):
        if not (fn.startswith("ctl_") and fn.endswith(".txt")):
            continue
        dec, enc = ((wire.decode_req, wire.encode_req) if "req" in fn
                    else (wire.decode_rep, wire.encode_rep))
        for line in open(os.path.join(d, fn)):
            p = line.split()
            if not p or p[0].startswith("#"):
                continue
            count += 1
            if p[0] in ("valid", "compat"):
                try:
                    h, b = enc(dec(frame(p[2]), frame(p[3])))
                    ok = h == frame(p[2]) and b == frame(p[4] if p[0] == "compat" else p[3])
                except wire.WireError as e:
                    ok = False
                    print("   ", e)
                check(ok, f"vector {fn} {p[1]} decodes and re-encodes")
            else:
                try:
                    dec(frame(p[3]), frame(p[4]))
                    got = "accepted"
                except wire.WireError as e:
                    got = "SL_" + e.status.name
                check(got == p[2], f"vector {fn} {p[1]} rejected with {p[2]} (got {got})")
    check(count >= 25, f"{count} control vectors read")


def elastic_world_env():
    """starling.elastic.world() under a fake torchrun environment, and a lone run."""
    env = {"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "1",
           "GROUP_RANK": "2", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "23456",
           "TORCHELASTIC_RESTART_COUNT": "4", "TORCHELASTIC_RUN_ID": "0123456789abcdef",
           "STARLING_JOB": "0123456789abcdef", "STARLING_ROUND": "9",
           "STARLING_CHECKPOINT_DIR": "/tmp/ck"}
    w = starling.elastic.world(env)
    check((w.rank, w.local_rank, w.world_size, w.local_world_size, w.group_rank, w.master_addr,
           w.master_port, w.restart_count, w.run_id, w.job, w.round, w.checkpoint_dir,
           w.distributed, w.is_rank0, w.under_starling) ==
          (2, 0, 3, 1, 2, "10.0.0.7", 23456, 4, "0123456789abcdef", "0123456789abcdef", 9,
           "/tmp/ck", True, False, True), f"elastic.world() from torchrun's variables: {w}")
    lone = starling.elastic.world({})
    check((lone.rank, lone.world_size, lone.master_addr, lone.master_port, lone.run_id,
           lone.job, lone.round, lone.checkpoint_dir, lone.distributed, lone.is_rank0) ==
          (0, 1, "127.0.0.1", 29500, "none", None, 0, None, False, True),
          f"elastic.world() alone: torch's defaults: {lone}")
    try:
        starling.elastic.world({"RANK": "3", "WORLD_SIZE": "3"})
        check(False, "a rank outside the world is refused")
    except ValueError as e:
        check("RANK" in str(e), f"a rank outside the world: {e}")
    import io
    out = io.StringIO()
    starling.report_step(7, loss=0.5, epoch=2, file=out)
    starling.report_epoch(2, val_acc=0.9, test_acc=0.875, file=out)
    check(out.getvalue() == '{"step":7,"loss":0.5,"epoch":2}\n{"epoch":2,"val_acc":0.9,'
          '"test_acc":0.875}\n', f"report_step/report_epoch lines: {out.getvalue()!r}")
    for bad in (lambda: starling.report_step(-1), lambda: starling.report_step(1, loss=float("nan")),
                lambda: starling.report_epoch(0), lambda: starling.report_epoch(1, step=3),
                lambda: starling.report_epoch(1, x=1.0, **{f"m{i}": 1.0 for i in range(60)})):
        try:
            bad()
            check(False, "a bad report is refused")
        except ValueError:
            pass
    check("torch" not in sys.modules, "starling.elastic imports no torch")


def jobs(a, b, tmp):
    """Elastic jobs (proto/control.md 4.7) through the client."""
    job = {
        "kind": "elastic", "name": "py-job", "seed": 5, "nodes": {"min": 1, "max": 2},
        "trainer": {"type": "builtin", "model": "mlp:32"},
        "dataset": {"name": "fashion-mnist", "limit": 3000, "val_split": 0.1},
        "epochs": 1, "global_batch": 64,
        "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "checkpoint_every": 1000,
    }
    bad = dict(job, nodes={"min": 2, "max": 1})
    try:
        a.submit(bad)
        check(False, "a bad job file is refused")
    except StarlingError as e:
        check(e.status == Status.EINVAL and e.message.startswith("job refused: nodes.max"),
              f"a bad job file: SL_EINVAL naming the field: {e.message}")
    jid = a.submit(job)
    check(len(jid) == 16 and a.submit(job) == jid, f"submit of a job: its id {jid}, again the same")
    t0 = time.monotonic()
    seen = list(a.watch_job(jid, interval=0.2, timeout=120))
    last = seen[-1]
    check(last["state"] == "done" and last["kind"] == "elastic" and last["job"] == jid and
          last["name"] == "py-job" and last["trainer"] == "builtin" and
          last["nodes"] == {"min": 1, "max": 2} and last["epochs"] == 1,
          f"watch_job ends with the job done ({len(seen)} states, "
          f"{time.monotonic() - t0:.1f} s): {last.get('state')}")
    check(all(seen[i]["step"] <= seen[i + 1]["step"] for i in range(len(seen) - 1))
          and len(seen) >= 2, "watch_job: the steps go forward")
    check(isinstance(last["round"], int) and last["round"] >= 1 and last["rounds"] and
          all(set(r) >= {"round", "world", "leader", "start_step", "started_ms"}
              for r in last["rounds"]) and set(last["world"]) <= {"a", "b"},
          f"status: rounds and world {last['world']} {last['rounds']}")
    st = b.status("py-job")
    check(st["job"] == jid and st["state"] == "done", "status by name, on the other peer")
    rows = a.results(jid)
    check(len(rows) == 1 and rows[0]["epoch"] == 1 and 0 < rows[0]["test_acc"] <= 1 and
          rows[0]["val_acc"] is not None and rows[0]["train_loss"] > 0,
          f"results of a job: one row per epoch: {rows}")
    curve = a.curve(jid)
    check(len(curve) >= 2 and all(c["step"] < d["step"] for c, d in zip(curve, curve[1:])) and
          all(c["world"] in (1, 2) for c in curve) and
          any(isinstance(c["loss"], float) and c["loss"] > 0 for c in curve),
          f"curve: points by step ({len(curve)})")
    rep = a.report(jid)
    check(rep.get("done", {}).get("model") == last.get("model") and len(rep["done"]["model"]) == 64,
          "report: done, with the model's blob")
    plots = a.plots(jid)
    check(plots.get("loss.svg", "").startswith("<svg") and "<svg" in plots.get("world.svg", ""),
          "plots: loss.svg and world.svg")
    # (each peer writes its log of a job to the store every second)
    wait_until(lambda: "every epoch is trained" in a.logs(jid), "logs(job): the end is there", 10)
    log = a.logs(jid)
    check(log.startswith("==> ") and log.count("==> a <==") == 1, f"logs(job): {log[:120]!r}")
    only = a.logs(jid, peer="a")
    check(only.startswith("==> a <==") and "==> b <==" not in only, "logs(job, peer=a)")
    check(a.logs(jid, peer="nobody") == "", "logs of a peer with none: empty")
    model = os.path.join(tmp, "model.npz")
    n = b.fetch_model(jid, model)
    import zipfile
    with zipfile.ZipFile(model) as z:
        names = z.namelist()
        check(n == os.path.getsize(model) and z.testzip() is None and
              len(names) >= 2 and all(x.endswith(".npy") for x in names),
              f"fetch_model on the other peer: a loadable .npz of {n} bytes: {names}")
    for cmd, args in (("status", [jid, "x"]), ("results", [jid, "x"]),
                      ("logs", [jid, "a", "x"])):
        check(raises(Status.EINVAL, a.call, cmd, *args), f"{cmd} JOB {' '.join(args[1:])}: SL_EINVAL")
    try:
        next(a.watch_job("py-client-test"))
        check(False, "watch_job of a study is refused")
    except ValueError:
        pass

    # cancel: a long job stops on every peer
    long = dict(job, name="py-long", epochs=500)
    lid = a.submit(long)
    wait_until(lambda: a.status(lid)["state"] == "running" and a.status(lid)["step"] > 0,
               "the long job trains", 60)
    check(raises(Status.ENOTFOUND, a.fetch_model, lid, os.path.join(tmp, "long.npz")),
          "fetch_model before the job is done: SL_ENOTFOUND")
    b.cancel("py-long")
    ends = list(a.watch_job(lid, interval=0.2, timeout=30))
    check(ends[-1]["state"] == "cancelled", f"cancel(job) on the other peer: {ends[-1]['state']}")
    wait_until(lambda: b.status(lid)["state"] == "cancelled", "the other peer: cancelled too")


def command_job(a, tmp):
    """A command job whose script uses starling.elastic (world 1: no torch, no data)."""
    script = os.path.join(SRC, "tests", "python", "job_script.py")
    cjob = {"kind": "elastic", "name": "py-cmd-job", "nodes": {"min": 1, "max": 1},
            "trainer": {"type": "command", "stop_grace_s": 2,
                        "command": f"PYTHONPATH={os.path.join(SRC, 'python')} "
                                   f"{sys.executable} {script}"},
            "epochs": 1, "global_batch": 8}
    cid = a.submit(cjob)
    cst = list(a.watch_job(cid, interval=0.2, timeout=60))[-1]
    check(cst["state"] == "done" and cst["trainer"] == "command", f"command job done: {cst['state']}")
    ccurve = a.curve(cid)
    check([(c["step"], c["loss"]) for c in ccurve if c["step"] > 0] ==
          [(1, 1.0), (2, 0.5), (3, 1.0 / 3)], f"report_step lines: the curve {ccurve}")
    ep = cst["metrics"]["epochs"]
    check(len(ep) == 1 and ep[0]["epoch"] == 1 and ep[0]["test_acc"] == 0.75 and
          ep[0]["train_loss"] == 0.5, f"report_epoch line: the epoch's metrics {ep}")
    wait_until(lambda: "checkpoint_dir exists" in a.logs(cid), "the command's output in logs", 10)
    clog = a.logs(cid)
    wl = [ln for ln in clog.splitlines() if "world {" in ln]
    w = json.loads(wl[0][wl[0].index("{"):]) if wl else {}
    check(w.get("rank") == 0 and w.get("world_size") == 1 and w.get("job") == cid and
          w.get("run_id") == cid and w.get("round", 0) >= 1 and w.get("master_port", 0) > 0 and
          w.get("distributed") is True and "checkpoint_dir exists: True" in clog,
          f"elastic.world() in the command: {w}")
    check(raises(Status.ENOTFOUND, a.fetch_model, cid, os.path.join(tmp, "none.npz"))
          and not os.path.exists(os.path.join(tmp, "none.npz")),
          "fetch_model of a command job (no model): SL_ENOTFOUND, no file")


def main():
    if not os.access(PEER, os.X_OK):
        print(f"skip: no peer binary at {PEER}")
        return 77
    vectors()
    tmp = tempfile.mkdtemp(prefix="sl-python-")
    procs = {}
    ports = {}

    def start(name, *extra, commands=True):
        ports.setdefault(name, free_port())
        log = open(os.path.join(tmp, name + ".log"), "ab")
        procs[name] = subprocess.Popen(
            [PEER, "--name", name, "--listen", f"127.0.0.1:{ports[name]}", "--data",
             os.path.join(tmp, name), *(["--allow-commands"] if commands else []),
             "--log-level", "info", *FAST, *extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=SRC)

    try:
        start("a")
        ok = wait_until(lambda: os.path.exists(os.path.join(tmp, "a", "control.sock")),
                        "a's control socket", 20)
        start("b", "--join", f"127.0.0.1:{ports['a']}")
        if not ok:
            return 1
        wait_until(lambda: os.path.exists(os.path.join(tmp, "b", "control.sock")),
                   "b's control socket", 20)
        a = starling.Client(peer=os.path.join(tmp, "a"))
        b = starling.Client(peer="ipc://" + os.path.join(tmp, "b", "control.sock"))

        # peer
        wait_until(lambda: sum(m["state"] == "alive" for m in a.members()) == 2, "a sees 2 alive")
        ms = a.members()
        check(any(m["self"] and m["name"] == "a" for m in ms), "members: a is self")
        check(all(isinstance(m["incarnation"], int) for m in ms), "members: exact integers")
        st = a.stats()
        check(st.get("name") == "a" and isinstance(st.get("uptime_ms"), int), "stats")
        check(a.version() != "", f"version {a.version()!r}")
        hi = a.hello()
        spec_cmds = {"members", "stats", "hello", "put", "get", "del", "keys", "watch-keys",
                     "store-fault", "blob-chunk", "blob-commit", "blob-fetch", "blob-read",
                     "blob-ls", "submit", "status", "results", "plot", "logs", "fetch", "cancel"}
        check(hi.get("protocol") == 1 and set(hi.get("commands", [])) == spec_cmds,
              f"hello: protocol 1 and exactly the commands control.md specifies: {hi}")
        check(a.supports("watch-keys") and not a.supports("frobnicate"), "supports()")
        check(raises(Status.EINVAL, a.call, "hello", "x"), "hello x: SL_EINVAL")

        # store
        a.put("py/k1", "hello")
        a.put("py/bin", bytes(range(256)))
        check(a.get("py/k1") == b"hello", "put/get")
        check(a.get("py/bin") == bytes(range(256)), "get: raw bytes, all 256 values")
        wait_until(lambda: b.get("py/k1") == b"hello", "b reads a's write")
        check(a.keys("py/") == ["py/bin", "py/k1"], f"keys(prefix) {a.keys('py/')}")
        check("py/k1" in a.keys(), "keys()")
        a.delete("py/bin")
        check(raises(Status.ENOTFOUND, a.get, "py/bin"), "get after delete: SL_ENOTFOUND")
        check(raises(Status.ENOTFOUND, a.delete, "py/none"), "delete of no key: SL_ENOTFOUND")
        check(raises(Status.EINVAL, a.call, "get"), "get without a key: SL_EINVAL")
        check(raises(Status.EINVAL, a.put, "", "x"), "put with an empty key: SL_EINVAL")
        check(raises(Status.ETOOBIG, a.put, "py/big", b"x" * 70000), "put of 70 KB: SL_ETOOBIG")

        # watch: a second connection writes while this one iterates
        got = []
        w = starling.Client(peer=os.path.join(tmp, "a"))

        watching = threading.Event()

        def writer():
            # the watch is open once it has seen a write: probe until then
            deadline = time.monotonic() + 20
            while not watching.wait(0.05) and time.monotonic() < deadline:
                a.put("py/w/probe", "")
            for i in range(3):
                a.put(f"py/w/{i}", str(i))
            a.delete("py/w/0")

        t = threading.Thread(target=writer)
        t.start()
        for ev in w.watch("py/w/", timeout=20):
            if ev["key"] == "py/w/probe":
                watching.set()
                continue
            got.append(ev)
            if len(got) == 4:
                break
        watching.set()
        t.join()
        w.close()
        check([e["key"] for e in got] == ["py/w/0", "py/w/1", "py/w/2", "py/w/0"]
              and got[1]["value"] == "1" and got[3].get("deleted") is True,
              f"watch yields each change in order: {got}")

        # blobs: put on a, get on b
        src = os.path.join(tmp, "blob.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(2 * (1 << 20) + 12345))
        h = a.put_blob(src)
        check(len(h) == 64, f"put_blob: {h}")
        dst = os.path.join(tmp, "blob.out")
        wait_until(lambda: any(x["hash"] == h for x in b.blobs()), "b lists the blob")
        n = b.get_blob(h, dst)
        check(n == os.path.getsize(src) and open(dst, "rb").read() == open(src, "rb").read(),
              "get_blob on another peer: the same bytes")
        check(raises(Status.EINVAL, a.call, "blob-fetch", "xyz"), "blob-fetch bad hash: EINVAL")

        # a command-trainer study: report() and checkpoint_dir() in the trainer
        py = sys.executable
        trainer = os.path.join(SRC, "tests", "python", "trainer.py")
        spec = {
            "name": "py-client-test",
            "seed": 7,
            "trainer": {"type": "command", "timeout_s": 120,
                        "command": f"PYTHONPATH={os.path.join(SRC, 'python')} {py} {trainer} "
                                   "{lr} 3"},
            "search_space": {"lr": {"type": "categorical", "values": [0.1, 0.2, 0.3]}},
            "searcher": {"type": "grid"},
            "scheduler": {"type": "fifo", "epochs": 3},
            "objectives": [{"metric": "score", "goal": "max"}],
            "checkpoint_every": 1,
            "concurrency": 2,
        }
        sid = a.submit(spec)
        check(len(sid) > 0 and a.submit(spec) == sid, f"submit: {sid}, again the same id")
        spec_file = os.path.join(tmp, "spec.json")
        with open(spec_file, "w") as f:
            json.dump(spec, f)
        check(b.submit(spec_file) == sid, "submit from a file on b: the same id")
        seen = list(a.watch_study(sid, interval=0.3))
        check(len(seen) >= 2 and bool(seen[-1].get("finished")),
              f"watch_study ends when finished ({len(seen)} states)")
        rows = a.results(sid)
        check(len(rows) == 3 and all(r["state"] == "done" and r["epoch"] == 3 for r in rows),
              f"results: 3 trials done: {rows}")
        check(all(abs(r["score"] - 3 * r["lr"]) < 1e-9 and r["resumed"] == 0
                  and abs(r["cfg_lr"] - r["lr"]) < 1e-9 for r in rows),
              "report(): the metrics the trainer reported (and config() saw the config)")
        rep = a.report(sid)
        check(rep.get("study") == sid and "leaderboard" in rep, "report (results command)")
        best = max(rows, key=lambda r: r["score"])
        wait_until(lambda: b.status(sid).get("finished"), "b sees the study finished")
        weights = b.fetch(sid, best["trial"], os.path.join(tmp, "w.json"))
        st = json.loads(weights)
        check(st == {"epoch": 3, "lr": best["lr"], "trial": best["trial"]},
              f"fetch: the trial's checkpoint_dir() file, on another peer: {st}")
        log = a.logs(sid, best["trial"])
        check(isinstance(log, str) and "score" in log, f"logs: {log[:200]!r}")
        check(raises(Status.ENOTFOUND, a.status, "nosuchstudy"), "status of no study: ENOTFOUND")
        check(raises(Status.ENOTFOUND, a.logs, sid, "nosuchtrial"), "logs of no trial: ENOTFOUND")

        # ASHA: the promoted trial resumes from what it left in checkpoint_dir()
        spec3 = dict(spec, name="py-asha", seed=9,
                     scheduler={"type": "asha", "min_epochs": 1, "max_epochs": 3,
                                "reduction": 3})
        sid3 = a.submit(spec3)
        list(a.watch_study(sid3, interval=0.3))
        rows3 = a.results(sid3)
        top = [r for r in rows3 if r["epoch"] == 3]
        check(len(rows3) == 3 and len(top) == 1 and top[0]["lr"] == 0.3 and
              top[0]["resumed"] == 1 and abs(top[0]["score"] - 0.9) < 1e-9,
              f"asha: the promoted trial resumed from checkpoint_dir(): {rows3}")

        # cancel a second study while it runs
        spec2 = dict(spec, name="py-cancel", seed=8,
                     trainer={"type": "command", "timeout_s": 120,
                              "command": "sleep 30 # {lr}"})
        sid2 = a.submit(spec2)
        wait_until(lambda: any(t["state"] == "running" for t in a.status(sid2)["trials"]),
                   "a trial of the second study runs")
        a.cancel(sid2)
        wait_until(lambda: a.status(sid2)["cancelled"] is True, "status says cancelled")

        # elastic jobs (the built-in trainer needs Debian's fashion-mnist)
        elastic_world_env()
        command_job(a, tmp)
        data = os.environ.get("SL_DATASETS") or "/usr/share/datasets"
        if os.path.isdir(os.path.join(data, "fashion-mnist")):
            jobs(a, b, tmp)
        else:
            print(f"skip: elastic jobs (no fashion-mnist in {data}; tools/setup installs it)")

        # errors: unknown command, bad arguments
        try:
            a.call("no-such-command")
            check(False, "unknown command refused")
        except StarlingError as e:
            check(e.status == Status.EUNSUPPORTED and "no-such-command" in e.message,
                  f"unknown command: SL_EUNSUPPORTED (control.md 4): {e}")
        for cmd, args in (("members", ["x"]), ("stats", ["x"]), ("blob-ls", ["x"]),
                          ("status", [sid, "x"]), ("cancel", [sid, "x"]),
                          ("logs", [sid, best["trial"], "x"]), ("keys", ["a", "b"])):
            check(raises(Status.EINVAL, a.call, cmd, *args),
                  f"{cmd} {' '.join(args)}: SL_EINVAL (bad arguments, control.md 4)")
        try:
            starling.Client(peer=os.path.join(tmp, "nope"))
            check(False, "a missing control socket is refused")
        except starling.ConnectionFailed as e:
            check("no control socket" in e.message, f"missing socket: {e.message}")
        a.close()
        b.close()

        # a keyed cluster's TCP control endpoint: CurveZMQ with the key file
        pub, sec = zmq.curve_keypair()
        keyfile = os.path.join(tmp, "cluster.key")
        fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"# test key\nstarling-cluster-key 1\npublic = " + pub + b"\nsecret = " +
                 sec + b"\n")
        os.close(fd)
        cport = free_port()
        start("k", "--key", keyfile, "--control", f"127.0.0.1:{cport}")
        k = starling.Client(peer=f"127.0.0.1:{cport}", key=keyfile)
        wait_until(lambda: k.members()[0]["name"] == "k", "keyed TCP control: members", 20)
        k.put("py/keyed", "yes")
        check(k.get("py/keyed") == b"yes", "keyed TCP control: put/get")
        k.close()
        nokey = starling.Client(peer=f"127.0.0.1:{cport}", timeout=1.0)
        try:
            nokey.members()
            check(False, "keyed TCP control refuses a client without the key")
        except starling.ConnectionFailed as e:
            check(e.status == Status.ETIMEDOUT, f"no key: no answer ({e.message[:60]})")
        nokey.close()

        # an open cluster without --allow-commands refuses a command job
        start("o", commands=False)
        wait_until(lambda: os.path.exists(os.path.join(tmp, "o", "control.sock")),
                   "o's control socket", 20)
        o = starling.Client(peer=os.path.join(tmp, "o"))
        cjob = {"kind": "elastic", "name": "py-open", "nodes": {"min": 1, "max": 1},
                "trainer": {"type": "command", "command": "true"}, "epochs": 1}
        try:
            o.submit(cjob)
            check(False, "an open peer refuses a command job")
        except StarlingError as e:
            check(e.status == Status.EAUTH and e.message.startswith("job refused"),
                  f"a command job in an open cluster: SL_EAUTH: {e.message[:70]}")
        o.close()
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for n in procs:
                print(f"--- {n}.log (tail)")
                print(open(os.path.join(tmp, n + ".log"), errors="replace").read()[-3000:])
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
