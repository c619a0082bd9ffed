#!/usr/bin/env python3
"""The replicated store on 20 local peers (issue 3; docs/store.md).

Starts PEERS `peer` processes on 127.0.0.1 with the daemon's default timers
(one data directory each under /tmp), all joined through p0, and measures
with sl-store-client (bench/store/store_client.c, one pipelined connection
per peer):

  burst      BURST puts of 64-byte values (keys burst/rR/0000000...), from
             WRITERS peers (key i from peer i % WRITERS). Every 100th
             write is a sample: time from its put's acknowledgement until
             every peer answers `get` with it; p50/p99 over the samples
             (target p99 <= 1 s). Also the time from the last
             acknowledgement until every peer's stats store.state_hash
             agrees.
  rest       the peers idle after the bursts: bytes sent per second per
             peer over REST seconds, from each daemon's own net.bytes_out
             (everything it sent: membership and store; replies to the
             stats requests are counted apart). Serf's ~340 B/s per peer
             (bench/results/membership.md) is given as a note, not a target.
  partition  a fresh cluster holding KEYS keys; every peer drops store
             traffic to and from the other half (`store-fault block`,
             membership carries on); each half overwrites its own 1 % of
             the keys and agrees within itself; then `store-fault heal` on
             every peer at once, and the time until all state_hash agree
             (target <= 2 s).

Each figure is the median of RUNS runs, printed with its target and ratio.
Only the timed parts hold /tmp/starling-bench.lock. Usage:

  bench/store/cluster.py [--build build-st] [--peers 20] [--burst 100000]
      [--writers 1] [--keys 100000] [--runs 3] [--rest 30]
      [--only burst,rest,partition]
"""
import argparse, contextlib, fcntl, json, os, shutil, socket, statistics, subprocess, sys
import tempfile, time

LOCK = '/tmp/starling-bench.lock'
SERF_REST_BPS = 340  # bytes/s per peer at rest, Serf 0.8 at N = 10-40 (membership.md)


def free_port(taken):
    while True:
        s = socket.socket()
        s.bind(('127.0.0.1', 0))
        p = s.getsockname()[1]
        s.close()
        if p not in taken:
            return p


@contextlib.contextmanager
def bench_lock():
    """Holds the shared benchmark lock (flock(2), as `flock` the command)."""
    with open(LOCK, 'a') as f:
        t = time.time()
        fcntl.flock(f, fcntl.LOCK_EX)
        waited = time.time() - t
        if waited > 1:
            print('  (waited %.0f s for %s)' % (waited, LOCK), flush=True)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def loadavg():
    return open('/proc/loadavg').read().split()[0]


class Cluster:
    def __init__(self, build, n, root):
        self.peer = os.path.join(build, 'peer')
        self.peerctl = os.path.join(build, 'peerctl')
        self.client = os.path.join(build, 'sl-store-client')
        for b in (self.peer, self.peerctl, self.client):
            if not os.access(b, os.X_OK):
                sys.exit('no %s: build first (ninja -C %s peer peerctl sl-store-client)' % (b, build))
        self.n, self.root = n, root
        self.ports = []
        for _ in range(n):
            self.ports.append(free_port(self.ports))
        self.addrs = ['127.0.0.1:%d' % p for p in self.ports]  # gossip (--listen)
        # control: each peer's Unix socket in its data directory (docs/security.md)
        self.ctls = ['ipc://%s/p%d/control.sock' % (os.path.abspath(root), i) for i in range(n)]
        self.procs = []

    def start(self):
        os.makedirs(self.root, exist_ok=True)
        for i in range(self.n):
            cmd = [self.peer, '--name', 'p%d' % i, '--listen', self.addrs[i],
                   '--data', os.path.join(self.root, 'p%d' % i), '--log-level', 'warning',
                   '--test-faults']  # store-fault makes the partitions
            if i:
                cmd += ['--join', self.addrs[0]]
            self.procs.append(subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(self.root, 'p%d.log' % i), 'a')))
        deadline = time.time() + 120
        while time.time() < deadline:
            if all(self.alive_count(i) == self.n for i in range(self.n)):
                return
            time.sleep(0.5)
        sys.exit('the %d peers did not all see each other alive within 120 s' % self.n)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def ctl(self, i, *args):
        r = subprocess.run([self.peerctl, '--peer', self.ctls[i], '--timeout', '10000', *args],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError('peerctl %s on p%d: %s' % (' '.join(args), i, r.stderr.strip()))
        return r.stdout

    def alive_count(self, i):
        try:
            return sum(m['state'] == 'alive' for m in json.loads(self.ctl(i, 'members', '--json')))
        except (RuntimeError, ValueError):
            return -1

    def stats(self, i):
        return json.loads(self.ctl(i, 'stats', '--json'))

    def client_run(self, mode, *args, addrs=None):
        """Runs sl-store-client and returns its JSON summary line."""
        cmd = [self.client, mode, *args, *(addrs or self.ctls)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        out = r.stdout.strip().splitlines()
        if r.returncode or not out:
            raise RuntimeError('%s failed (%d): %s %s' % (' '.join(cmd[:3]), r.returncode,
                                                          r.stderr.strip(), r.stdout.strip()))
        return json.loads(out[-1])

    def call(self, i, *args):
        r = subprocess.run([self.client, 'call', self.ctls[i], *args], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError('call %s on p%d: %s' % (' '.join(args), i, r.stderr.strip()))


def median_line(name, values, unit, target=None, lower_is_better=True):
    med = statistics.median(values)
    s = '  %-34s median %9.3f %-6s (runs: %s)' % (
        name, med, unit, ', '.join('%.3f' % v for v in values))
    if target is not None:
        s += '   target <= %g %s, ratio %.2f %s' % (
            target, unit, med / target, 'met' if med <= target else 'NOT met')
    print(s, flush=True)
    return med


def run_burst(c, a, results):
    print('burst: %d writes from %d writer(s), %d peers, sample every 100th' %
          (a.burst, a.writers, c.n), flush=True)
    for r in range(a.runs):
        c.client_run('agree', '--timeout', '120')  # start from a settled cluster
        with bench_lock():
            load = loadavg()
            j = c.client_run('burst', '--writers', str(a.writers), '--count', str(a.burst),
                             '--sample', '100', '--window', '64',
                             '--prefix', 'burst/r%d/' % r, '--tag', 'r%d' % r,
                             '--timeout', '900')
        j['load'] = load
        print('  run %d (load %s): %d writes in %.1f s (%.0f/s); %d samples: p50 %.3f s, '
              'p99 %.3f s, max %.3f s; state_hash agreed %.3f s after the last ack' % (
                  r + 1, load, j['acked'], j['write_s'], j['writes_per_s'], j['samples_seen'],
                  j['p50_s'], j['p99_s'], j['max_s'], j['agree_after_last_ack_s']), flush=True)
        results['burst'].append(j)
    b = results['burst']
    median_line('visible everywhere, p50', [x['p50_s'] for x in b], 's')
    median_line('visible everywhere, p99', [x['p99_s'] for x in b], 's', 1.0)
    median_line('visible everywhere, max', [x['max_s'] for x in b], 's')
    median_line('all state_hash agree after last ack', [x['agree_after_last_ack_s'] for x in b], 's')
    median_line('write phase (anchor for the above)', [x['write_s'] for x in b], 's')
    median_line('writes acknowledged per second', [x['writes_per_s'] for x in b], '/s')


def run_rest(c, a, results):
    print('rest: %d peers idle, %d s windows, bytes sent from each daemon\'s net.bytes_out' %
          (c.n, a.rest), flush=True)
    c.client_run('agree', '--timeout', '120')
    time.sleep(5)  # let the rounds after the last change fall quiet (5 x 100 ms, then 1 s summaries)
    for r in range(a.runs):
        with bench_lock():
            load = loadavg()
            t0 = time.time()
            s0 = [c.stats(i) for i in range(c.n)]
            time.sleep(a.rest)
            s1 = [c.stats(i) for i in range(c.n)]
            dt = time.time() - t0
        # each peer's own interval between its two readings (its uptime_ms),
        # not the harness's, which also spans the 2 x 20 stats calls
        bps = statistics.mean((y['net']['bytes_out'] - x['net']['bytes_out']) * 1000.0 /
                              (y['uptime_ms'] - x['uptime_ms']) for x, y in zip(s0, s1))
        mps = statistics.mean((y['net']['msgs_out'] - x['net']['msgs_out']) * 1000.0 /
                              (y['uptime_ms'] - x['uptime_ms']) for x, y in zip(s0, s1))
        st = {k: sum(y['store'][k] - x['store'][k] for x, y in zip(s0, s1))
              for k in ('digests_sent', 'summaries_sent', 'deltas_sent')}
        results['rest'].append({'bps_per_peer': bps, 'msgs_per_s_per_peer': mps,
                                'window_s': dt, 'load': load, **st})
        print('  run %d (load %s): %.0f B/s per peer, %.2f msgs/s per peer; store in the window: '
              '%d digests, %d summaries, %d deltas (all peers)' % (
                  r + 1, load, bps, mps, st['digests_sent'],
                  st['summaries_sent'], st['deltas_sent']), flush=True)
    med = median_line('bytes/s per peer at rest', [x['bps_per_peer'] for x in results['rest']], 'B/s')
    print('  (note: Serf ~%d B/s per peer for membership alone; ratio %.2f)' %
          (SERF_REST_BPS, med / SERF_REST_BPS), flush=True)


def run_partition(c, a, results):
    half = c.n // 2
    side = [list(range(half)), list(range(half, c.n))]
    d = max(1, a.keys // 100)
    print('partition: %d peers holding %d keys, halves %d/%d, %d keys (1 %%) overwritten on each '
          'side' % (c.n, a.keys, half, c.n - half, d), flush=True)
    t = time.time()
    c.client_run('burst', '--writers', str(c.n), '--count', str(a.keys), '--no-observe',
                 '--window', '64', '--prefix', 'part/', '--tag', 'base', '--timeout', '900')
    c.client_run('agree', '--timeout', '300')
    print('  preloaded and agreed in %.0f s' % (time.time() - t), flush=True)
    for r in range(a.runs):
        for s in (0, 1):
            other = side[1 - s]
            for i in side[s]:
                c.call(i, 'store-fault', 'block', *[c.addrs[k] for k in other])
        for s in (0, 1):
            c.client_run('burst', '--writers', str(len(side[s])), '--count', str(d),
                         '--first', str((2 * r + s) * d % a.keys), '--no-observe',
                         '--prefix', 'part/', '--tag', 'r%d-%d' % (r, s), '--timeout', '300',
                         addrs=[c.ctls[i] for i in side[s]])
        for s in (0, 1):
            c.client_run('agree', '--timeout', '120', addrs=[c.ctls[i] for i in side[s]])
        hashes = {c.stats(i)['store']['state_hash'] for i in (0, c.n - 1)}
        if len(hashes) != 2:
            raise RuntimeError('the halves agree before the heal: the block did not hold')
        with bench_lock():
            load = loadavg()
            j = c.client_run('heal', '--timeout', '120')
        j['load'] = load
        results['partition'].append(j)
        print('  run %d (load %s): healed, every state_hash agrees after %.3f s' %
              (r + 1, load, j['agree_s']), flush=True)
    median_line('heal until all agree (1 % per side)',
                [x['agree_s'] for x in results['partition']], 's', 2.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-st')
    ap.add_argument('--peers', type=int, default=20)
    ap.add_argument('--burst', type=int, default=100000)
    ap.add_argument('--writers', type=int, default=1)
    ap.add_argument('--keys', type=int, default=100000)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--rest', type=int, default=30)
    ap.add_argument('--only', default='burst,rest,partition')
    ap.add_argument('--keep', action='store_true', help='keep the data directories and logs')
    a = ap.parse_args()
    modes = a.only.split(',')
    print('%s: %s, load %s' % (time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                               ' '.join(sys.argv), loadavg()), flush=True)
    results = {'burst': [], 'rest': [], 'partition': []}
    root = tempfile.mkdtemp(prefix='sl-store-cluster.', dir='/tmp')
    ok = False
    try:
        if 'burst' in modes or 'rest' in modes:
            c = Cluster(a.build, a.peers, os.path.join(root, 'a'))
            try:
                c.start()
                if 'burst' in modes:
                    run_burst(c, a, results)
                if 'rest' in modes:
                    run_rest(c, a, results)
            finally:
                c.stop()
        if 'partition' in modes:
            c = Cluster(a.build, a.peers, os.path.join(root, 'b'))
            try:
                c.start()
                run_partition(c, a, results)
            finally:
                c.stop()
        ok = True
    finally:
        print('end: load %s' % loadavg(), flush=True)
        if a.keep or not ok:
            print('data and logs kept in %s' % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print('JSON ' + json.dumps(results))


if __name__ == '__main__':
    main()
