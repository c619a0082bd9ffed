#!/usr/bin/env python3
"""How writes spread past 32 others, with real peers (issue 14; docs/store.md,
"How writes spread"; the simulator's figures: tests/sim_store_spread_test.c).

Starts PEERS `peer` processes on 127.0.0.1 (bench/store/cluster.py's
Cluster: default timers, all joined through p0), then WRITES lone puts
from p0, GAP seconds apart, each timed by sl-store-client from its
acknowledgement until every peer answers `get` with it (one sample per
put). Then every peer's stats: DELTAs pushed and relayed
(store.pushed, store.relayed: absent before the spread policy), DELTA
messages built by anti-entropy (store.deltas_sent), and bad input under
`store` (an echo refused by a peer from before would show there).

  bench/store/spread_peers.py [--build build-rel] [--peers 60] [--writes 30] [--gap 0.5]

sl-store-client polls at most 256 peers, so PEERS is at most 256.
"""
import argparse, json, os, shutil, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, loadavg  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build-rel')
    ap.add_argument('--peers', type=int, default=60)
    ap.add_argument('--writes', type=int, default=30)
    ap.add_argument('--gap', type=float, default=0.5)
    a = ap.parse_args()
    if a.peers > 256:
        sys.exit('sl-store-client polls at most 256 peers')
    print('%s: %s, load %s' % (time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                               ' '.join(sys.argv), loadavg()), flush=True)
    root = tempfile.mkdtemp(prefix='sl-store-spread.', dir='/tmp')
    c = Cluster(a.build, a.peers, root)
    lat = []
    try:
        c.start()
        c.client_run('agree', '--timeout', '120')
        s0 = [c.stats(i) for i in range(c.n)]
        for k in range(a.writes):
            j = c.client_run('burst', '--writers', '1', '--count', '1', '--sample', '1',
                             '--window', '1', '--prefix', 'spread/%04d/' % k, '--tag', str(k),
                             '--timeout', '60')
            lat.append(j['max_s'])
            time.sleep(a.gap)
        c.client_run('agree', '--timeout', '120')
        s1 = [c.stats(i) for i in range(c.n)]
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)

    def total(group, key):
        return sum(y.get(group, {}).get(key, 0) - x.get(group, {}).get(key, 0)
                   for x, y in zip(s0, s1))

    lat.sort()
    print('  %d lone writes on %d peers (load %s): every peer holds one after p50 %.3f s, '
          'p99 %.3f s, max %.3f s' % (len(lat), c.n, loadavg(), statistics.median(lat),
                                        lat[min(len(lat) - 1, int(0.99 * (len(lat) - 1) + 0.5))],
                                        lat[-1]), flush=True)
    pushed, relayed, ae = total('store', 'pushed'), total('store', 'relayed'), total('store', 'deltas_sent')
    bad = total('bad_input_by_module', 'store')
    print('  per write: %.1f DELTAs pushed by the writer, %.1f relayed (%.2f a peer), %.1f DELTA '
          'messages of anti-entropy (all peers); bad input under store: %d' % (
              pushed / len(lat), relayed / len(lat), relayed / len(lat) / c.n, ae / len(lat), bad),
          flush=True)


if __name__ == '__main__':
    main()
