#!/usr/bin/env python3
"""Real peers at rest, N at a time (issue 14 item 3; bench/results/scale.md).

For each N: starts N `peer` processes on 127.0.0.1 (bench/store/cluster.py's
Cluster: default timers, all joined through p0), waits until every peer
sees all N alive (and the CPU all peers used until then), lets the joins
settle for SETTLE seconds (and at least until a minute after the first
start: the suspicions, deaths, refutations, repair push-pulls and store
messages counted then are the forming's), then over REST
seconds at rest measures

  cpu      each peer's own CPU (utime + stime from /proc/PID/stat), in ms
           per second: median and max over the peers, and the whole
           machine's load average;
  swim     suspicions and deaths raised in the window, summed over every
           peer's stats (swim.suspects, swim.deaths): none was killed, so
           each is false;
  net      connections opened and evicted, messages dropped and sends
           refused in the window, summed (net.*);

then WRITES lone puts from p0, each timed by sl-store-client from its
acknowledgement until every peer answers `get` with it.

  bench/scale/peers.py [--build build-h6] [--sizes 50,100,150,200]
      [--settle 20] [--rest 60] [--writes 20] [--batch 0 --batch-gap 2]

All N at once on 2 cores is a storm (every process starting, joining and
catching up at load 150+) in which a loaded peer is suspected and
refuted thousands of times before the cluster settles; --batch 25 starts
them 25 at a time as a fleet would come up.

Peers at one N are stopped before the next N starts. Prints one line per
N and a JSON line at the end.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'store'))
from cluster import Cluster, free_port, loadavg  # noqa: E402

TICK = os.sysconf('SC_CLK_TCK')


def cpu_s(pid):
    """CPU seconds (user + system) the process has used."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def start(c, timeout, batch, gap):
    """Starts the cluster as Cluster.start does (all joining through p0),
    BATCH peers every GAP seconds (0: all at once), with a longer deadline
    and progress: the number of peers that see all N alive. Returns the
    CPU seconds all peers used until then."""
    os.makedirs(c.root, exist_ok=True)

    def launch(i):
        # The port is picked now, not when the cluster was made: the peers
        # started before hold hundreds of outbound connections, whose
        # ephemeral ports took one picked a minute earlier (a peer of a
        # staggered 200 failed with "address in use").
        c.ports[i] = free_port(c.ports)
        c.addrs[i] = '127.0.0.1:%d' % c.ports[i]
        cmd = [c.peer, '--name', 'p%d' % i, '--listen', c.addrs[i],
               '--data', os.path.join(c.root, 'p%d' % i), '--log-level', 'notice',
               '--test-faults']
        if i:
            cmd += ['--join', c.addrs[0]]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(c.root, 'p%d.log' % i), 'a'))

    for i in range(c.n):
        if batch and i and i % batch == 0:
            time.sleep(gap)
        c.procs.append(launch(i))
    time.sleep(1)
    for i, p in enumerate(c.procs):
        if p.poll() is not None:  # it could not listen: once more, on another port
            print('  p%d exited (%s): started again' % (i, p.returncode), flush=True)
            c.procs[i] = launch(i)
    t0 = time.time()
    while time.time() - t0 < timeout:
        seen = [c.alive_count(i) for i in range(c.n)]
        full = sum(x == c.n for x in seen)
        if full == c.n:
            return sum(cpu_s(p.pid) for p in c.procs)
        print('  %.0f s: %d of %d peers see all alive (fewest %d), load %s' % (
            time.time() - t0, full, c.n, min(seen), loadavg()), flush=True)
        time.sleep(5)
    raise RuntimeError('the %d peers did not all see each other alive within %d s' %
                       (c.n, timeout))


def totals(stats, group, keys):
    return {k: sum(s.get(group, {}).get(k, 0) for s in stats) for k in keys}


SWIM_KEYS = ('suspects', 'deaths', 'probe_failures', 'probes', 'syncs_sent')
FORM_KEYS = ('suspects', 'deaths', 'refutations', 'syncs_repair')
STORE_KEYS = ('digests_sent', 'summaries_sent', 'deltas_sent', 'snapshots_sent')
NET_KEYS = ('conns_opened', 'conns_evicted', 'dropped_out', 'sends_refused', 'msgs_out',
            'bytes_out', 'pending')


def one(a, n):
    root = tempfile.mkdtemp(prefix='sl-scale-peers.', dir='/tmp')
    c = Cluster(a.build, n, root)
    r = {'n': n}
    try:
        t = time.time()
        r['cpu_to_form_s'] = round(start(c, a.join_timeout, a.batch, a.batch_gap), 1)
        r['all_alive_s'] = round(time.time() - t, 1)
        # the window starts SETTLE s after all are alive, and no sooner than
        # a minute after the first start: the counters then hold the storm
        time.sleep(max(a.settle, 60 - (time.time() - t)))
        r['load_start'] = loadavg()
        s0 = [c.stats(i) for i in range(n)]
        r['forming'] = totals(s0, 'swim', FORM_KEYS)
        r['forming'].update(totals(s0, 'store', STORE_KEYS))
        r['forming']['window_start_s'] = round(time.time() - t, 1)
        c0 = [cpu_s(p.pid) for p in c.procs]
        m0 = machine_busy()
        t0 = time.time()
        time.sleep(a.rest)
        c1 = [cpu_s(p.pid) for p in c.procs]
        m1 = machine_busy()
        dt = time.time() - t0
        r['machine_busy'] = round((m1[0] - m0[0]) / max(1, m1[1] - m0[1]), 3)
        s1 = [c.stats(i) for i in range(n)]
        r['load_end'] = loadavg()
        ms = sorted((y - x) * 1000.0 / dt for x, y in zip(c0, c1))
        r['cpu_ms_per_s_median'] = round(statistics.median(ms), 2)
        r['cpu_ms_per_s_max'] = round(ms[-1], 2)
        r['cpu_cores_all'] = round(sum(ms) / 1000.0, 3)
        sw0, sw1 = totals(s0, 'swim', SWIM_KEYS), totals(s1, 'swim', SWIM_KEYS)
        ne0, ne1 = totals(s0, 'net', NET_KEYS), totals(s1, 'net', NET_KEYS)
        r['swim'] = {k: sw1[k] - sw0[k] for k in SWIM_KEYS}
        r['net'] = {k: ne1[k] - ne0[k] for k in NET_KEYS if k != 'pending'}
        r['net']['conns_open_median'] = statistics.median(s['net']['conns_open'] for s in s1)
        r['alive_seen_min'] = min(s['members']['alive'] for s in s1)
        r['window_s'] = round(dt, 1)
        print('N=%d: all alive after %.1f s (all peers\' CPU until then %.1f s); from the start '
              'until the window (%.0f s): suspects %d, deaths %d, refutations %d, repair syncs %d; '
              'store digests %d, summaries %d, deltas %d, snapshots %d' % (
                  n, r['all_alive_s'], r['cpu_to_form_s'], r['forming']['window_start_s'],
                  r['forming']['suspects'], r['forming']['deaths'], r['forming']['refutations'],
                  r['forming']['syncs_repair'], r['forming']['digests_sent'],
                  r['forming']['summaries_sent'], r['forming']['deltas_sent'],
                  r['forming']['snapshots_sent']), flush=True)
        print('N=%d: all alive after %.1f s; at rest %.0f s (load %s -> %s, machine %.0f %% busy): '
              'CPU a peer median %.2f ms/s, max %.2f, all peers %.3f cores; suspects %d, deaths '
              '%d, probe failures %d; conns opened %d, evicted %d, dropped %d, refused %d; fewest '
              'alive seen %d' % (
                  n, r['all_alive_s'], dt, r['load_start'], r['load_end'],
                  100 * r['machine_busy'],
                  r['cpu_ms_per_s_median'], r['cpu_ms_per_s_max'], r['cpu_cores_all'],
                  r['swim']['suspects'], r['swim']['deaths'], r['swim']['probe_failures'],
                  r['net']['conns_opened'], r['net']['conns_evicted'], r['net']['dropped_out'],
                  r['net']['sends_refused'], r['alive_seen_min']), flush=True)
        if a.writes:
            lat = []
            for k in range(a.writes):
                j = c.client_run('burst', '--writers', '1', '--count', '1', '--sample', '1',
                                 '--window', '1', '--prefix', 'scale/%04d/' % k, '--tag', str(k),
                                 '--timeout', '60')
                lat.append(j['max_s'])
                time.sleep(a.gap)
            lat.sort()
            r['write_seen_by_all_s'] = {
                'p50': round(statistics.median(lat), 3),
                'p99': round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3),
                'max': round(lat[-1], 3)}
            print('N=%d: %d lone writes from p0 seen by every peer after p50 %.3f s, p99 %.3f s, '
                  'max %.3f s (load %s)' % (n, len(lat), r['write_seen_by_all_s']['p50'],
                                            r['write_seen_by_all_s']['p99'],
                                            r['write_seen_by_all_s']['max'], loadavg()),
                  flush=True)
    finally:
        c.stop()
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print('logs kept in %s' % root)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-h6')
    ap.add_argument('--sizes', default='50,100,150,200')
    ap.add_argument('--settle', type=float, default=20)
    ap.add_argument('--rest', type=float, default=60)
    ap.add_argument('--writes', type=int, default=20)
    ap.add_argument('--gap', type=float, default=0.3)
    ap.add_argument('--join-timeout', type=float, default=300)
    ap.add_argument('--batch', type=int, default=0,
                    help='start this many peers at a time (0: all at once)')
    ap.add_argument('--batch-gap', type=float, default=2.0, help='seconds between batches')
    ap.add_argument('--keep', action='store_true', help='keep the data directories and logs')
    a = ap.parse_args()
    print('%s: %s, load %s' % (time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                               ' '.join(sys.argv), loadavg()), flush=True)
    out = []
    for n in a.sizes.split(','):
        try:
            out.append(one(a, int(n)))
        except RuntimeError as e:
            print('N=%s: %s' % (n, e), flush=True)
            out.append({'n': int(n), 'error': str(e)})
    print('JSON ' + json.dumps(out))


if __name__ == '__main__':
    main()
