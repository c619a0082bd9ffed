"""Real `peer` processes on 127.0.0.1 for the study benchmarks: start,
kill -9, restart, ask with peerctl, read /proc. Default daemon timers
unless a benchmark passes others. Every process started here is killed by
Cluster.close() (also on exceptions: use it as a context manager)."""
import json, os, shutil, signal, socket, subprocess, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_cpu_s(pid):
    """utime + stime of the process (all its threads, not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / CLK_TCK


def proc_rss_mb(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def proc_hwm_mb(pid):
    """Peak resident memory of the process so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def wait_until(what, fn, timeout=60, every=0.05):
    """Polls fn until it returns something true; its value. A benchmark
    waits on an observable condition, never on a fixed sleep."""
    end = time.time() + timeout
    while time.time() < end:
        r = fn()
        if r:
            return r
        time.sleep(every)
    raise TimeoutError(f"timed out waiting for {what}")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Cluster:
    """n peers p0..p{n-1}; p1.. join through p0. `extra`: flags for every
    peer (timers, --slots)."""

    def __init__(self, build, n, extra=(), keep=False, prefix="p", tag="study"):
        self.build = os.path.abspath(build)
        self.dir = tempfile.mkdtemp(prefix=f"sl-bench-{tag}.")
        self.extra = list(extra)
        self.keep = keep
        self.port = {}
        self.proc = {}
        self.names = [f"{prefix}{i}" for i in range(n)]
        try:
            for i, name in enumerate(self.names):
                self.start(name, join=self.addr(self.names[0]) if i else None)
        except Exception:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def addr(self, name):
        if name not in self.port:
            self.port[name] = free_port()
        return f"127.0.0.1:{self.port[name]}"

    def ctl_dir(self, name):
        """What peerctl --peer takes: the peer's data directory (its control
        socket; the gossip port serves no control)."""
        return os.path.join(self.dir, "data", name)

    def start(self, name, join=None, extra=()):
        args = [os.path.join(self.build, "peer"), "--name", name, "--listen", self.addr(name),
                "--data", os.path.join(self.dir, "data", name), "--log-level", os.environ.get("SL_BENCH_LOG", "notice")]
        if join:
            args += ["--join", join]
        # the benchmarks' studies run command trainers on an open loopback cluster
        args += ["--allow-commands"] + self.extra + list(extra)
        with open(os.path.join(self.dir, name + ".log"), "ab") as log:
            self.proc[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                               cwd=ROOT)

    def alive_names(self):
        return [n for n in self.names if n in self.proc]

    def pid(self, name):
        return self.proc[name].pid

    def pids(self):
        return [p.pid for p in self.proc.values()]

    def kill9(self, name):
        p = self.proc.pop(name)
        p.send_signal(signal.SIGKILL)
        p.wait()

    def term(self, name):
        p = self.proc.pop(name)
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def wait(self, what, fn, timeout=60, every=0.05):
        return wait_until(what, fn, timeout, every)

    def ctl(self, name, *args, timeout=5.0, check=True):
        r = subprocess.run([os.path.join(self.build, "peerctl"), "--peer", self.ctl_dir(name),
                            "--timeout", str(int(timeout * 1000))] + list(args),
                           capture_output=True, text=True, timeout=timeout + 5)
        if check and r.returncode != 0:
            raise RuntimeError(f"peerctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def ctl_json(self, name, *args, timeout=5.0):
        try:
            return json.loads(self.ctl(name, *args, "--json", timeout=timeout))
        except Exception:
            return None

    def converged(self, names=None):
        """Every running peer sees exactly the running peers alive."""
        names = sorted(names or self.alive_names())
        for o in names:
            m = self.ctl_json(o, "members")
            if not m:
                return False
            ms = m if isinstance(m, list) else m.get("members", [])
            alive = sorted(x["name"] for x in ms if x.get("state") == "alive")
            if alive != names:
                return False
        return True

    def ready(self, names=None):
        """Every running peer's study runtime may claim (stats study.ready:
        joined and caught up)."""
        for o in names or self.alive_names():
            st = self.ctl_json(o, "stats")
            if not st or not st.get("study", {}).get("ready"):
                return False
        return True

    def wait_key(self, name, key, timeout, every=0.02, on_poll=None):
        """Waits until `key` holds a value on peer `name`: one `peerctl
        watch` that streams the key's changes, not a `peerctl get` process
        every `every` seconds (each costs the shared cores a few ms, which
        the peers being measured would otherwise share). on_poll() runs
        every `every` seconds meanwhile. Returns the value's arrival time."""
        import select
        w = subprocess.Popen([os.path.join(self.build, "peerctl"), "--peer", self.ctl_dir(name),
                              "watch", key, "--keys"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        try:
            # the watch is open once its first (empty) part arrived; a value
            # set before that is read once
            end = time.time() + timeout
            if self.ctl(name, "get", key, check=False).strip():
                return time.time()
            while time.time() < end:
                if on_poll:
                    on_poll()
                r, _, _ = select.select([w.stdout], [], [], every)
                if r:
                    line = w.stdout.readline()
                    if line.strip():
                        return time.time()
                    if not line and w.poll() is not None:
                        raise RuntimeError(f"peerctl watch {key} ended")
            raise TimeoutError(f"timed out waiting for {key}")
        finally:
            w.kill()
            w.wait()

    def submit(self, name, spec):
        path = os.path.join(self.dir, spec["name"] + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out = self.ctl(name, "submit", path).strip()
        return out.split()[0] if out else out

    def status(self, name, sid):
        return self.ctl_json(name, "status", sid)

    def close(self):
        for p in self.proc.values():
            try:
                p.send_signal(signal.SIGKILL)
                p.wait()
            except Exception:
                pass
        self.proc = {}
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
