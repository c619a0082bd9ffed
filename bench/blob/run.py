#!/usr/bin/env python3
"""Blob throughput between two local peers (docs/store.md "Blobs").

Starts two `peer` processes on 127.0.0.1 (one data directory each under
a temporary directory on the same disk as the source file), then for each
run makes a new random file of SIZE bytes and times:

  put        `peerctl blob put FILE` on p0 (chunks streamed to p0, written
             with an fsync each, verified whole, recorded in the store)
  replicate  from the put's return until p1 (the other placed peer) is
             recorded as holder: p1 pulled 100 chunks from p0 and verified
  get        `peerctl blob get HASH OUT` on p1 after deleting p1's chunk
             files: p1 pulls every chunk from p0 again, verifies, and
             streams them to OUT (temp file, fsync, rename)
  cp         `cp FILE DST` (the anchor), and `cp` + `sync DST`

Prints medians over RUNS runs and the ratios to cp. Usage:
  bench/blob/run.py [--build build-DIR] [--size-mb 100] [--runs 3]
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

def free_port():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); p = s.getsockname()[1]; s.close(); return p

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default='build')
    ap.add_argument('--size-mb', type=int, default=100)
    ap.add_argument('--runs', type=int, default=3)
    a = ap.parse_args()
    peer, peerctl = os.path.join(a.build, 'peer'), os.path.join(a.build, 'peerctl')
    tmp = tempfile.mkdtemp(prefix='sl-blob-bench.', dir='/tmp')
    ports = [free_port(), free_port()]
    procs = []
    def ctl(i, *args, timeout=600):
        return subprocess.run([peerctl, '--peer', '127.0.0.1:%d' % ports[i], '--timeout', '20000', *args],
                              capture_output=True, text=True, timeout=timeout)
    try:
        for i in range(2):
            cmd = [peer, '--name', 'p%d' % i, '--listen', '127.0.0.1:%d' % ports[i],
                   '--data', os.path.join(tmp, 'p%d' % i), '--log-level', 'warning',
                   '--probe-interval', '200', '--probe-timeout', '100']
            if i:
                cmd += ['--join', '127.0.0.1:%d' % ports[0]]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                          stderr=open(os.path.join(tmp, 'p%d.log' % i), 'w')))
        deadline = time.time() + 30
        while time.time() < deadline:
            r = ctl(1, 'members', '--json')
            if r.returncode == 0 and sum(m['state'] == 'alive' for m in json.loads(r.stdout)) == 2:
                break
            time.sleep(0.1)
        else:
            sys.exit('peers did not converge')
        res = {k: [] for k in ('put', 'replicate', 'get', 'cp', 'cp_sync')}
        size = a.size_mb * 1000 * 1000
        for run in range(a.runs):
            src = os.path.join(tmp, 'src.bin')
            with open(src, 'wb') as f:
                f.write(os.urandom(size))
            os.sync()
            t0 = time.perf_counter()
            r = ctl(0, 'blob', 'put', src)
            t1 = time.perf_counter()
            if r.returncode:
                sys.exit('put failed: ' + r.stderr)
            h = r.stdout.strip()
            while True:
                ls = json.loads(ctl(1, 'blob', 'ls', '--json').stdout)
                b = next((b for b in ls if b['hash'] == h), None)
                if b and sorted(b['holders']) == ['p0', 'p1']:
                    break
                if time.perf_counter() - t1 > 300:
                    sys.exit('replication did not finish')
                time.sleep(0.02)
            t2 = time.perf_counter()
            shutil.rmtree(os.path.join(tmp, 'p1', 'blob', 'blobs'))
            out = os.path.join(tmp, 'out.bin')
            t3 = time.perf_counter()
            r = ctl(1, 'blob', 'get', h, out)
            t4 = time.perf_counter()
            if r.returncode or not filecmp(src, out):
                sys.exit('get failed or differs: ' + r.stderr)
            dst = os.path.join(tmp, 'cp.bin')
            t5 = time.perf_counter()
            subprocess.run(['cp', src, dst], check=True)
            t6 = time.perf_counter()
            os.remove(dst)
            t7 = time.perf_counter()
            subprocess.run(['cp', src, dst], check=True)
            subprocess.run(['sync', dst], check=True)
            t8 = time.perf_counter()
            for k, v in (('put', t1 - t0), ('replicate', t2 - t1), ('get', t4 - t3),
                         ('cp', t6 - t5), ('cp_sync', t8 - t7)):
                res[k].append(v)
            print('run %d: put %.2f s, replicate %.2f s, get %.2f s, cp %.2f s, cp+sync %.2f s'
                  % (run + 1, t1 - t0, t2 - t1, t4 - t3, t6 - t5, t8 - t7), flush=True)
            for p in (out, dst, src):
                os.remove(p)
            # drop the blob's chunks on both peers so the next run starts clean on disk
        mb = size / 1e6
        med = {k: statistics.median(v) for k, v in res.items()}
        print('\nmedians over %d runs, %d MB blob (1 MiB chunks, 4 in flight):' % (a.runs, a.size_mb))
        for k in ('put', 'replicate', 'get', 'cp', 'cp_sync'):
            print('  %-10s %6.2f s  %7.1f MB/s  %5.1fx cp  %5.1fx cp+sync'
                  % (k, med[k], mb / med[k], med[k] / med['cp'], med[k] / med['cp_sync']))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)

def filecmp(a, b):
    import filecmp as fc
    return fc.cmp(a, b, shallow=False)

if __name__ == '__main__':
    main()
