#!/usr/bin/env python3
"""Elastic recovery: torchrun's against Starling's, 3 nodes on loopback
(issue 13's Benchmark table).

    python3 bench/elastic/recovery.py --systems torchrun,torchrun-lc5,starling \\
        [--runs 3] [--build build-pC] [--keep] [--raw FILE]

Systems (interleaved, run 1 of each, then run 2 of each, ...):

  torchrun          /usr/bin/torchrun (Debian's python3-torch 1.13), 3 agents
                    --nnodes 2:3 --nproc_per_node 1 --rdzv_backend c10d
                    --rdzv_endpoint 127.0.0.1:PORT --max_restarts 10, defaults
                    otherwise (last_call 30 s, keep-alive 5 s x 3, monitor 5 s);
                    worker bench/elastic/torch_ddp_bench.py (DDP MLP, gloo)
  torchrun-lc5      the same with --rdzv_conf last_call_timeout=5
  torchrun-pypi     the same under --torchrun-pypi (current PyPI torch in a venv)
  torchrun-pypi-lc5
  torchrun[-pypi]-ns[-lc5]  with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torch >= 2.4
                    shares the agent's rendezvous store with the workers, and
                    then (2.15 here) re-formed worlds failed to connect
  starling          3 `peer`s (fast timers as tests/cluster, --threads 1 as the
                    workers' torch.set_num_threads(1)), an elastic job of
                    the built-in mlp:256,128, nodes 2..3, the same batch
  starling-cmd      the same peers, a command job running torch_ddp_bench.py
                    (torchrun's environment, as issue 13 item 4)
  hivemind          3 hivemind_bench.py peers (hivemind.Optimizer over a DHT,
                    --hivemind-python): no restarts and no stop, survivors
                    step on, slower; recover_s is when every survivor is back
                    at its usual pace (a gap <= 1.5x the median before the
                    kill) within --hm-window s, recover_first_s when each has
                    stepped once; pace_before_s, pace_after_s: median gaps

One run of a system (nodes A, B, C started in that order; A is torchrun's
c10d store host, the first to bind the endpoint):

  (a) once all 3 are stepping in one world and past step --checkpoint-every
      (torchrun's first checkpoint), a random 3-8 s later, kill -9
      of C (torchrun: its agent and worker; starling: the peer and its
      children), a member that is neither the store host nor (starling)
      the round leader: time until every survivor completes a step in a
      new world (recover_s; recover_first_s for the first survivor);
  (c) steps redone: the last step done before the kill minus the step the
      new world starts from;
  (b) a fresh node D started: time from its launch until its first step
      (join_s), and whether survivors' workers were restarted for it;
  (d) kill -9 of A (torchrun: the store host; starling: the current round's
      leader, or A if the status cannot be read): does the job step again
      within --host-window s (host_continued, host_recover_s)?

Step times come from the nodes' own lines, wall-clock ms
(torch_ddp_bench.py's START/STEP lines in DIR/steps/; the peers'
ELASTIC-START/-STEPPING/-LEFT lines on stderr), the kill times from this
script's clock (one machine, one clock). Prints one JSON object per run
(also appended to --raw) and a table of medians at the end.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
WORKER = os.path.join(HERE, "torch_ddp_bench.py")
FAST_TIMERS = ["--probe-interval", "200", "--probe-timeout", "100", "--suspicion-mult", "3",
               "--sync-interval", "2000", "--leave-wait", "300"]


def now_ms():
    return int(time.time() * 1000)


def free_port(taken=()):
    """A free TCP port on 127.0.0.1 below 32768 (the kernel's ephemeral
    range starts there)."""
    while True:
        p = random.randrange(20000, 32768)
        if p in taken:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(pid):
    """pid and all its descendants, parents first."""
    kids, out, todo = children_map(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


class Node:
    """One started process (a torchrun agent or a peer), its log and name."""

    def __init__(self, name, argv, logpath, env=None):
        self.name, self.logpath = name, logpath
        self.log = open(logpath, "ab")
        self.launched_ms = now_ms()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, cwd=ROOT)
        self.killed_ms = None

    def alive(self):
        return self.proc.poll() is None

    def kill9(self):
        """kill -9 of the process and every descendant (a node's death)."""
        pids = tree(self.proc.pid)
        t = now_ms()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.killed_ms = t
        self.proc.wait()
        return t

    def close(self):
        if self.alive():
            for p in tree(self.proc.pid):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
        self.log.close()


def wait_until(what, cond, timeout_s, poll_s=0.05, nodes=()):
    """cond()'s first true value; TimeoutError after timeout_s, or at once
    when every process in nodes has exited (nothing is left to wait for)."""
    end = time.time() + timeout_s
    while time.time() < end:
        v = cond()
        if v:
            return v
        if nodes and not any(n.alive() for n in nodes):
            raise TimeoutError(f"{what}: every process exited ("
                               + ", ".join(f"{n.name} {n.proc.returncode}" for n in nodes) + ")")
        time.sleep(poll_s)
    raise TimeoutError(f"{what}: not within {timeout_s} s")


KV = re.compile(r"(\w+)=(\S+)")


def parse_kv(text):
    d = {}
    for k, v in KV.findall(text):
        d[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return d


def script_events(stepdir):
    """torch_ddp_bench.py's START/STEP lines, every file in DIR/steps/."""
    ev = []
    if not os.path.isdir(stepdir):
        return ev
    for fn in os.listdir(stepdir):
        with open(os.path.join(stepdir, fn)) as f:
            for line in f:
                parts = line.split(" ", 1)
                if len(parts) == 2 and parts[0] in ("START", "STEP") and line.endswith("\n"):
                    d = parse_kv(parts[1])
                    d["ev"], d["file"] = parts[0], fn
                    ev.append(d)
    ev.sort(key=lambda d: d["wall_ms"])
    return ev


def peer_events(path, node):
    """A peer's ELASTIC-START/-STEPPING/-LEFT lines."""
    ev = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"\b(ELASTIC-START|ELASTIC-STEPPING|ELASTIC-LEFT)\s+(.*)$", line)
                if not m:
                    continue
                d = parse_kv(m.group(2).split(" why=")[0])
                if " why=" in m.group(2):
                    d["why"] = m.group(2).split(" why=", 1)[1]
                d["ev"], d["node"] = m.group(1), node
                if "wall_ms" in d:
                    ev.append(d)
    except OSError:
        pass
    return ev


def stepped_after(ev, nodes, t):
    """{node: wall_ms of its first STEP by a worker STARTed after t} (the
    first step of a new world: every world change restarts the script)."""
    fresh = {d["file"] for d in ev if d["ev"] == "START" and d["wall_ms"] >= t}
    out = {}
    for d in ev:
        if d["ev"] == "STEP" and d["file"] in fresh and d["node"] in nodes and d["node"] not in out:
            out[d["node"]] = d["wall_ms"]
    return out


class TorchrunCluster:
    def __init__(self, a, dirp, torchrun, lc5, run_id, no_shared_store=False):
        self.a, self.dir, self.torchrun, self.lc5 = a, dirp, torchrun, lc5
        self.no_shared_store = no_shared_store or a.no_shared_store
        self.port = free_port()
        self.run_id = run_id
        self.nodes = {}
        self.stepdir = os.path.join(dirp, "steps")
        os.makedirs(os.path.join(dirp, "ckpt"))

    def start(self, name):
        argv = [self.torchrun, "--nnodes", "2:3", "--nproc_per_node", "1",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{self.port}",
                "--rdzv_id", self.run_id, "--max_restarts", "10",
                # --redirects 0 (the default) fails on Python 3.11 with torch
                # 1.13 (Std.from_str finds no member 0): stderr to the log dir,
                # stdout teed
                "--redirects", "2", "--tee", "1",
                "--log_dir", os.path.join(self.dir, "tlogs-" + name)]
        if self.lc5:
            argv += ["--rdzv_conf", "last_call_timeout=5"]
        argv += [WORKER, "--model", self.a.model, "--global-batch", str(self.a.global_batch),
                 "--checkpoint-every", str(self.a.checkpoint_every),
                 "--ckpt-dir", os.path.join(self.dir, "ckpt"), "--step-log", self.stepdir]
        env = dict(os.environ, BENCH_NODE=name)
        if self.no_shared_store:
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        n = Node(name, argv, os.path.join(self.dir, name + ".log"), env)
        self.nodes[name] = n
        return n

    def host_up(self):
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect(("127.0.0.1", self.port))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def events(self):
        return script_events(self.stepdir)

    def full_world(self, names):
        """The nodes in names are all stepping in one world of len(names)."""
        ev = self.events()
        latest = {}
        for d in ev:
            if d["ev"] == "STEP":
                latest[d["node"]] = d
        return all(n in latest and latest[n]["world"] == len(names)
                   and latest[n]["wall_ms"] > time.time() * 1000 - 2000 for n in names)

    def close(self):
        for n in self.nodes.values():
            n.close()


def run_torchrun(a, dirp, system, run_no, rng):
    pypi = system.startswith("torchrun-pypi")
    torchrun = a.torchrun_pypi if pypi else a.torchrun
    c = TorchrunCluster(a, dirp, torchrun, system.endswith("lc5"), f"bench{run_no}{rng.randrange(1 << 30)}",
                        "-ns" in system)
    r = {"system": system, "run": run_no}
    try:
        t0 = now_ms()
        c.start("A")
        wait_until("store host listening", c.host_up, 60)
        c.start("B")
        c.start("C")
        wait_until("3 nodes stepping", lambda: c.full_world(["A", "B", "C"]), a.start_timeout,
                   nodes=list(c.nodes.values()))
        r["start_s"] = (min(d["wall_ms"] for d in c.events() if d["ev"] == "STEP"
                            and d["world"] == 3) - t0) / 1000
        # past the first checkpoint, so that the kill falls anywhere in an interval
        wait_until("the first checkpoint", lambda: max(
            d["step"] for d in c.events() if d["ev"] == "STEP") >= a.checkpoint_every,
            a.start_timeout, nodes=list(c.nodes.values()))
        time.sleep(rng.uniform(3, 8))
        # (a) kill -9 of C, agent and worker
        t_kill = c.nodes["C"].kill9()
        before = [d for d in c.events() if d["ev"] == "STEP" and d["wall_ms"] <= t_kill]
        r["last_before"] = max(d["step"] for d in before)
        got = wait_until("survivors stepping again",
                         lambda: (lambda s: s if len(s) == 2 else None)(
                             stepped_after(c.events(), {"A", "B"}, t_kill)), a.recover_timeout,
                         nodes=[c.nodes["A"], c.nodes["B"]])
        r["recover_s"] = (max(got.values()) - t_kill) / 1000
        r["recover_first_s"] = (min(got.values()) - t_kill) / 1000
        starts = [d for d in c.events() if d["ev"] == "START" and d["wall_ms"] >= t_kill]
        r["resumed_from"] = min(d["start_step"] for d in starts)
        r["redone"] = r["last_before"] - r["resumed_from"]
        r["worlds_after_kill"] = sorted({d["world"] for d in starts})
        # (b) a fresh node D
        time.sleep(2)
        d_node = c.start("D")
        t_join = d_node.launched_ms
        try:
            got = wait_until("D stepping", lambda: stepped_after(c.events(), {"D"}, t_join).get("D"),
                             a.recover_timeout, nodes=[c.nodes[n] for n in "ABD"])
        except TimeoutError:
            got = None
        if got is None:
            # the job did not take the fresh node: say how it ended
            r["join_s"] = None
            r["join_failed"] = {n: c.nodes[n].proc.poll() for n in "ABD"}
            r["join_failed_after_s"] = round((now_ms() - t_join) / 1000, 1)
            return r
        r["join_s"] = (got - t_join) / 1000
        restarted = stepped_after(c.events(), {"A", "B"}, t_join)
        r["join_survivors_restarted"] = sorted(restarted)
        # (d) kill -9 of the store host A
        wait_until("A, B, D stepping", lambda: c.full_world(["A", "B", "D"]), a.recover_timeout,
                   nodes=[c.nodes[n] for n in "ABD"])
        time.sleep(rng.uniform(2, 4))
        t_host = c.nodes["A"].kill9()
        cont = None
        end = time.time() + a.host_window
        while time.time() < end:
            s = stepped_after(c.events(), {"B", "D"}, t_host)
            if s:
                cont = s
                break
            if not c.nodes["B"].alive() and not c.nodes["D"].alive():
                break
            time.sleep(0.1)
        r["host_continued"] = bool(cont)
        r["host_recover_s"] = (max(cont.values()) - t_host) / 1000 if cont else None
        r["host_agents_exit"] = {n: c.nodes[n].proc.poll() for n in ("B", "D")}
        if not c.nodes["B"].alive():
            r["host_agents_exit_after_s"] = round((now_ms() - t_host) / 1000, 1)
    except TimeoutError as e:
        r["error"] = str(e)
    finally:
        c.close()
    return r


def resumed(ev, nodes, t, window_ms, pace_ms):
    """Hivemind's peers never restart; after a kill they may keep stepping,
    slower. For each node, the wall_ms of its first step after t that ends
    a gap of at most 1.5 x pace_ms (its usual pace before t), within
    window_ms: when it is back at its usual pace; absent if never."""
    out = {}
    for n in nodes:
        ts = [d["wall_ms"] for d in ev if d["ev"] == "STEP" and d["node"] == n]
        before = [x for x in ts if x <= t]
        prev = before[-1] if before else t
        for x in (x for x in ts if t < x <= t + window_ms):
            if x - prev <= 1.5 * pace_ms:
                out[n] = x
                break
            prev = x
    return out


def run_hivemind(a, dirp, system, run_no, rng):
    """The same kills against Hivemind peers (hivemind_bench.py)."""
    r = {"system": system, "run": run_no}
    stepdir = os.path.join(dirp, "steps")
    maddr = os.path.join(dirp, "A.maddr")
    nodes = {}
    worker = os.path.join(HERE, "hivemind_bench.py")

    def start(name):
        argv = [a.hivemind_python, worker, "--step-log", stepdir,
                "--run-id", f"bench{run_no}{rng.randrange(1 << 30)}" if name == "A" else run_id[0]]
        if name == "A":
            argv += ["--maddr-out", maddr]
        else:
            with open(maddr) as f:
                argv += ["--initial-peers", f.read().strip()]
        nodes[name] = Node(name, argv, os.path.join(dirp, name + ".log"),
                           dict(os.environ, BENCH_NODE=name))
        if name == "A":
            run_id[0] = argv[argv.index("--run-id") + 1]
        return nodes[name]

    def full(names):
        latest = {}
        for d in script_events(stepdir):
            if d["ev"] == "STEP":
                latest[d["node"]] = d
        return all(n in latest and latest[n]["world"] >= len(names) for n in names)

    def pace(ev, names, t):
        gaps = []
        for n in names:
            ts = [d["wall_ms"] for d in ev if d["ev"] == "STEP" and d["node"] == n and d["wall_ms"] <= t]
            gaps += [y - x for x, y in zip(ts[-6:], ts[-5:])]
        return statistics.median(gaps) / 1000 if gaps else None

    run_id = [None]
    win = int(a.hm_window * 1000)
    try:
        t0 = now_ms()
        start("A")
        wait_until("A's address", lambda: os.path.exists(maddr), 120, 0.1, nodes=[nodes["A"]])
        start("B")
        start("C")
        wait_until("3 peers stepping together", lambda: full(["A", "B", "C"]), a.start_timeout, 0.1,
                   nodes=list(nodes.values()))
        r["start_s"] = (now_ms() - t0) / 1000
        time.sleep(rng.uniform(3, 8))
        t_kill = nodes["C"].kill9()
        ev = script_events(stepdir)
        r["pace_before_s"] = pace(ev, ["A", "B"], t_kill)
        r["last_before"] = max(d["step"] for d in ev if d["ev"] == "STEP" and d["wall_ms"] <= t_kill)
        time.sleep(a.hm_window)
        ev = script_events(stepdir)
        got = resumed(ev, ["A", "B"], t_kill, win, r["pace_before_s"] * 1000)
        first = {n: min([d["wall_ms"] for d in ev if d["ev"] == "STEP" and d["node"] == n
                         and d["wall_ms"] > t_kill] or [None]) for n in "AB"}
        r["recover_s"] = (max(got.values()) - t_kill) / 1000 if len(got) == 2 else None
        if all(first.values()):
            r["recover_first_s"] = (max(first.values()) - t_kill) / 1000
            after = [d["step"] for d in ev if d["ev"] == "STEP" and d["wall_ms"] > t_kill]
            r["resumed_from"] = min(after) - 1
            r["redone"] = max(0, r["last_before"] - r["resumed_from"])
        r["pace_after_s"] = pace(ev, ["A", "B"], now_ms())
        t_join = start("D").launched_ms
        got = wait_until("D stepping", lambda: min([d["wall_ms"] for d in script_events(stepdir)
                                                     if d["ev"] == "STEP" and d["node"] == "D"] or [0]),
                         a.recover_timeout, 0.1, nodes=[nodes["D"]])
        r["join_s"] = (got - t_join) / 1000
        r["join_survivors_restarted"] = sorted({d["node"] for d in script_events(stepdir)
                                                if d["ev"] == "START" and d["wall_ms"] >= t_join
                                                and d["node"] != "D"})
        wait_until("A, B, D stepping", lambda: full(["A", "B", "D"]), a.recover_timeout, 0.1,
                   nodes=list(nodes.values()))
        time.sleep(rng.uniform(2, 4))
        t_host = nodes["A"].kill9()  # the peer every other one joined through
        ev = script_events(stepdir)
        r["pace_before_host_kill_s"] = pace(ev, ["B", "D"], t_host)
        time.sleep(a.hm_window)
        ev = script_events(stepdir)
        r["host_stepped"] = all(any(d["ev"] == "STEP" and d["node"] == n and d["wall_ms"] > t_host
                                    for d in ev) for n in ("B", "D"))
        r["pace_after_host_kill_s"] = pace(ev, ["B", "D"], now_ms())
        got = resumed(ev, ["B", "D"], t_host, win, r["pace_before_host_kill_s"] * 1000)
        r["host_continued"] = r.pop("host_stepped")
        r["host_recover_s"] = (max(got.values()) - t_host) / 1000 if len(got) == 2 else None
    except (TimeoutError, OSError) as e:
        r["error"] = str(e)
    finally:
        for n in nodes.values():
            n.close()
    return r


class StarlingCluster:
    def __init__(self, a, dirp, cmd):
        self.a, self.dir, self.cmd = a, dirp, cmd
        self.peer = os.path.join(a.build, "peer")
        self.peerctl = os.path.join(a.build, "peerctl")
        self.nodes, self.ports = {}, {}
        self.stepdir = os.path.join(dirp, "steps")
        self.job = None

    def start(self, name, join=None):
        self.ports[name] = free_port(set(self.ports.values()))
        self.ports[name + ".ring"] = free_port(set(self.ports.values()))
        argv = [self.peer, "--name", name, "--listen", f"127.0.0.1:{self.ports[name]}",
                "--ring-port", str(self.ports[name + ".ring"]), "--threads", "1",
                "--data", os.path.join(self.dir, "data", name), "--log-level", "info"] + FAST_TIMERS
        if join:
            argv += ["--join", f"127.0.0.1:{self.ports[join]}"]
        if self.cmd:
            argv += ["--allow-commands"]
        n = Node(name, argv, os.path.join(self.dir, name + ".log"), dict(os.environ, BENCH_NODE=name))
        self.nodes[name] = n
        return n

    def ctl(self, name, *args, timeout=10):
        return subprocess.run([self.peerctl, "--peer", os.path.join(self.dir, "data", name),
                               "--timeout", "2000", *args], capture_output=True, text=True,
                              timeout=timeout)

    def alive_members(self, name):
        p = self.ctl(name, "members", "--json")
        if p.returncode != 0:
            return set()
        try:
            return {m["name"] for m in json.loads(p.stdout) if m["state"] == "alive"}
        except ValueError:
            return set()

    def submit(self, name):
        a = self.a
        job = {"kind": "elastic", "name": "bench-recovery", "seed": 1,
               "nodes": {"min": 2, "max": 3}, "epochs": 1000,
               "global_batch": a.global_batch, "checkpoint_every": a.checkpoint_every}
        if self.cmd:
            job["trainer"] = {"type": "command", "stop_grace_s": 10, "command":
                              f"{a.cmd_python} {WORKER} --model {a.model} --global-batch "
                              f"{a.global_batch} --checkpoint-every {a.checkpoint_every} "
                              f"--ckpt-dir {os.path.join(self.dir, 'ckpt')} --step-log {self.stepdir}"}
        else:
            job["trainer"] = {"type": "builtin", "model": "mlp:256,128" if a.model == "mlp" else "cnn:32,64"}
            job["dataset"] = "fashion-mnist"
            job["optimizer"] = {"type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0}
        path = os.path.join(self.dir, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        p = self.ctl(name, "submit", path)
        if p.returncode != 0:
            raise RuntimeError(f"peerctl submit: {p.stderr.strip()}")
        self.job = p.stdout.strip().split()[-1]
        return self.job

    def status(self, name):
        try:
            p = self.ctl(name, "status", self.job, "--json")
            return json.loads(p.stdout) if p.returncode == 0 else None
        except (ValueError, subprocess.TimeoutExpired):
            return None

    def events(self):
        ev = []
        for name in self.nodes:
            ev += peer_events(os.path.join(self.dir, name + ".log"), name)
        ev.sort(key=lambda d: d["wall_ms"])
        return ev

    def full_world(self, names):
        """Every node in names started and stepped in one round of len(names)."""
        ev = self.events()
        rounds = {}
        for d in ev:
            if d["ev"] == "ELASTIC-START" and d.get("size") == len(names):
                rounds.setdefault(d["round"], set()).add(d["node"])
        stepping = {(d["round"], d["node"]) for d in ev if d["ev"] == "ELASTIC-STEPPING"}
        return any(set(names) <= ns and all((r, n) in stepping for n in names)
                   for r, ns in rounds.items())

    def max_round(self):
        return max([d["round"] for d in self.events() if "round" in d] or [0])

    def stepped_after(self, names, rnd):
        out = {}
        for d in self.events():
            if d["ev"] == "ELASTIC-STEPPING" and d["round"] > rnd and d["node"] in names \
                    and d["node"] not in out:
                out[d["node"]] = d["wall_ms"]
        return out

    def close(self):
        for n in self.nodes.values():
            n.close()


def run_starling(a, dirp, system, run_no, rng):
    cmd = system == "starling-cmd"
    c = StarlingCluster(a, dirp, cmd)
    r = {"system": system, "run": run_no}

    # A command job's steps are its script's lines (as torchrun's); a
    # built-in job's, the peers' ELASTIC-* lines.
    def full(names):
        if not cmd:
            return c.full_world(names)
        latest = {}
        for d in script_events(c.stepdir):
            if d["ev"] == "STEP":
                latest[d["node"]] = d
        return all(n in latest and latest[n]["world"] == len(names)
                   and latest[n]["wall_ms"] > now_ms() - 2000 for n in names)

    def stepped(names, rnd, t):
        """{node: first step in a world newer than round rnd / started after t}"""
        if cmd:
            return stepped_after(script_events(c.stepdir), set(names), t)
        return c.stepped_after(set(names), rnd)

    def all_of(names, rnd, t):
        s = stepped(names, rnd, t)
        return s if len(s) == len(names) else None

    def leader_of(name):
        st = c.status(name)
        try:
            return st["rounds"][-1]["leader"], st
        except (TypeError, KeyError, IndexError):
            return None, st

    try:
        c.start("A")
        c.start("B", join="A")
        c.start("C", join="A")
        wait_until("3 peers converged", lambda: all(
            c.alive_members(n) >= {"A", "B", "C"} for n in "ABC"), 60, 0.2,
            nodes=list(c.nodes.values()))
        t0 = now_ms()
        r["job"] = c.submit("A")
        wait_until("3 peers stepping", lambda: full(["A", "B", "C"]), a.start_timeout, 0.1,
                   nodes=list(c.nodes.values()))
        r["start_s"] = (now_ms() - t0) / 1000
        if cmd:
            wait_until("the first checkpoint", lambda: max(
                d["step"] for d in script_events(c.stepdir) if d["ev"] == "STEP") >= a.checkpoint_every,
                a.start_timeout, 0.1, nodes=list(c.nodes.values()))
        else:
            wait_until("the first checkpoint", lambda: ((c.status("A") or {}).get("step") or 0)
                       >= a.checkpoint_every, a.start_timeout, 0.2, nodes=list(c.nodes.values()))
        time.sleep(rng.uniform(3, 8))
        leader, st = leader_of("A")
        r["leader_before_kill"] = leader
        victim = next(n for n in ("C", "B") if n != leader)
        survivors = sorted({"A", "B", "C"} - {victim})
        r["victim"] = victim
        # (a) kill -9 of a member that leads nothing and seeded nothing
        rnd = c.max_round()
        t_kill = c.nodes[victim].kill9()
        got = wait_until("survivors stepping again", lambda: all_of(survivors, rnd, t_kill),
                         a.recover_timeout, 0.05, nodes=[c.nodes[n] for n in survivors])
        r["recover_s"] = (max(got.values()) - t_kill) / 1000
        r["recover_first_s"] = (min(got.values()) - t_kill) / 1000
        ev = c.events()
        left = [d["step"] for d in ev if d["ev"] == "ELASTIC-LEFT" and d["round"] == rnd]
        new = [d for d in ev if d["ev"] == "ELASTIC-START" and d["round"] > rnd]
        r["left_steps"] = left
        r["status_step_before_kill"] = (st or {}).get("step")
        r["new_world"] = [(d["node"], d["rank"], d["size"], d.get("source"), d["start_step"])
                          for d in new]
        if cmd:
            sev = script_events(c.stepdir)
            r["last_before"] = max(d["step"] for d in sev if d["ev"] == "STEP" and d["wall_ms"] <= t_kill)
            r["resumed_from"] = min(d["start_step"] for d in sev
                                    if d["ev"] == "START" and d["wall_ms"] >= t_kill)
        else:
            r["last_before"] = max(left) if left else r["status_step_before_kill"]
            r["resumed_from"] = min(d["start_step"] for d in new) if new else None
        if r["last_before"] is not None and r["resumed_from"] is not None:
            r["redone"] = r["last_before"] - r["resumed_from"]
        # (b) a fresh node D
        time.sleep(2)
        rnd = c.max_round()
        t_join = c.start("D", join="A").launched_ms
        got = wait_until("D stepping", lambda: stepped(["D"], rnd, t_join).get("D"),
                         a.recover_timeout, 0.05, nodes=[c.nodes["D"]])
        r["join_s"] = (got - t_join) / 1000
        if cmd:
            r["join_survivors_restarted"] = sorted(stepped(survivors, rnd, t_join))
        else:
            r["join_survivors_restarted"] = []  # the built-in trainer never restarts a process
        # (d) kill -9 of the round leader (else A)
        names = survivors + ["D"]
        wait_until("3 stepping again", lambda: full(names), a.recover_timeout, 0.1,
                   nodes=[c.nodes[n] for n in names])
        time.sleep(rng.uniform(2, 4))
        leader, _ = leader_of(survivors[0])
        host = leader if leader in names else "A"
        r["host_killed"], r["host_was_leader"] = host, leader == host
        rest = sorted(set(names) - {host})
        rnd = c.max_round()
        t_host = c.nodes[host].kill9()
        try:
            got = wait_until("survivors of the leader's kill stepping", lambda: all_of(rest, rnd, t_host),
                             a.host_window, 0.05, nodes=[c.nodes[n] for n in rest])
            r["host_continued"] = True
            r["host_recover_s"] = (max(got.values()) - t_host) / 1000
        except TimeoutError:
            r["host_continued"] = False
            r["host_recover_s"] = None
    except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as e:
        r["error"] = str(e)
    finally:
        c.close()
    return r


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x):
    return "-" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="torchrun,torchrun-lc5,starling")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default="build")
    ap.add_argument("--torchrun", default="/usr/bin/torchrun")
    ap.add_argument("--torchrun-pypi", default="/tmp/venv-torch/bin/torchrun")
    ap.add_argument("--no-shared-store", action="store_true",
                    help="TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 for the agents (torch >= 2.4 "
                         "shares the rendezvous store with the workers by default)")
    ap.add_argument("--hivemind-python", default="/tmp/venv-hm/bin/python",
                    help="a python with hivemind (pip install hivemind)")
    ap.add_argument("--hm-window", type=float, default=90,
                    help="s watched after each Hivemind kill for its usual pace to return")
    ap.add_argument("--cmd-python", default="/usr/bin/python3", help="the command job's python")
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--checkpoint-every", type=int, default=200,
                    help="steps (peers/examples/elastic-mlp.json's 200)")
    ap.add_argument("--start-timeout", type=float, default=180)
    ap.add_argument("--recover-timeout", type=float, default=180)
    ap.add_argument("--host-window", type=float, default=90,
                    help="s to wait for a step after the store host's / leader's kill")
    ap.add_argument("--raw", default="", help="append each run's JSON object to this file")
    ap.add_argument("--keep", action="store_true", help="keep each run's directory (logs)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed or None)
    systems = a.systems.split(",")
    for s in systems:
        if not re.fullmatch(r"torchrun(-pypi)?(-ns)?(-lc5)?|starling|starling-cmd|hivemind", s):
            ap.error(f"--systems: unknown system {s}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    for run_no in range(1, a.runs + 1):
        for s in systems:
            dirp = tempfile.mkdtemp(prefix=f"sl-recovery-{s}-{run_no}-")
            load = os.getloadavg()[0]
            fn = (run_torchrun if s.startswith("torchrun") else
                  run_hivemind if s == "hivemind" else run_starling)
            r = fn(a, dirp, s, run_no, rng)
            r["load"] = round(load, 1)
            r["dir"] = dirp if a.keep or "error" in r else None
            print(json.dumps(r), flush=True)
            if a.raw:
                with open(a.raw, "a") as f:
                    f.write(json.dumps(r) + "\n")
            results.append(r)
            if not a.keep and "error" not in r:
                shutil.rmtree(dirp, ignore_errors=True)
    print()
    print("| system | runs | kill -> survivors stepping, s (median; each run) | steps redone | "
          "fresh node -> its first step, s | survivors restarted for the join | "
          "store host / leader killed: continues? |")
    print("|---|---|---|---|---|---|---|")
    for s in systems:
        rs = [r for r in results if r["system"] == s]
        rec = [r.get("recover_s") for r in rs]
        red = [r.get("redone") for r in rs]
        join = [r.get("join_s") for r in rs]
        rest = [len(r.get("join_survivors_restarted", [])) for r in rs if "join_s" in r]
        cont = [r.get("host_continued") for r in rs if "host_continued" in r]
        print(f"| {s} | {len(rs)} | {fmt(median(rec))} ({', '.join(fmt(x) for x in rec)}) | "
              f"{fmt(median(red))} ({', '.join(fmt(x) for x in red)}) | "
              f"{fmt(median(join))} ({', '.join(fmt(x) for x in join)}) | "
              f"{', '.join(map(str, rest))} | "
              f"{sum(1 for x in cont if x)} of {len(cont)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
