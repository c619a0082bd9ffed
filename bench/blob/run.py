#!/usr/bin/env python3
"""Blob throughput between two local peers (docs/store.md "Blobs").

Starts two `peer` processes on 127.0.0.1 (one data directory each under
a temporary directory on the same disk as the source file), then for each
run makes a new random file of SIZE bytes and times:

  put        `peerctl blob put FILE` on p0 (chunks streamed to p0 and
             written with no fsync each; at commit read back, verified
             whole and fdatasynced, the directories synced once, then
             recorded in the store)
  replicate  from the put's return until p1 (the other placed peer) is
             recorded as holder: p1 pulled 100 chunks from p0, verified
             and synced them the same way
  get        `peerctl blob get HASH OUT` on p1 after deleting p1's chunk
             files: p1 pulls every chunk from p0 again, verifies, and
             streams them to OUT (temp file, fsync, rename)
  cp         `cp FILE DST` (the anchor), and `cp` + `sync DST`
  file_*     the same file put through the library with no peer
             (sl-blob-disk-bench): file_per_chunk with an fsync of each
             chunk file and its directory (the old way), file_batched with
             one batched sync per blob (sl_blob_node_put_file now); both
             hash each chunk and the whole, so the gap is the syncing

Prints medians over RUNS runs and the ratios to cp, and each peer's
memory high-water mark (VmHWM: it stays a few chunks above the idle peer's
whatever SIZE is). Usage:
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
        return subprocess.run([peerctl, '--peer', os.path.join(tmp, 'p%d' % i), '--timeout', '20000', *args],
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
        keys = ('put', 'replicate', 'get', 'cp', 'cp_sync', 'file_per_chunk', 'file_batched')
        res = {k: [] for k in keys}
        disk_bench = os.path.join(a.build, 'sl-blob-disk-bench')
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
            line = ('run %d: put %.2f s, replicate %.2f s, get %.2f s, cp %.2f s, cp+sync %.2f s'
                    % (run + 1, t1 - t0, t2 - t1, t4 - t3, t6 - t5, t8 - t7))
            if os.path.exists(disk_bench):
                d = json.loads(subprocess.run([disk_bench, src, tmp], check=True, capture_output=True,
                                              text=True).stdout)
                res['file_per_chunk'].append(d['per_chunk_s'])
                res['file_batched'].append(d['batched_s'])
                line += ', file per-chunk fsync %.2f s, batched %.2f s' % (d['per_chunk_s'], d['batched_s'])
            print(line, flush=True)
            for p in (out, dst, src):
                os.remove(p)
            # drop the blob's chunks on both peers so the next run starts clean on disk
        hwm = {}
        for i, p in enumerate(procs):
            with open('/proc/%d/status' % p.pid) as f:
                for line in f:
                    if line.startswith(('VmHWM', 'VmRSS')):
                        hwm.setdefault(i, {})[line.split(':')[0]] = int(line.split()[1]) / 1024
        mb = size / 1e6
        med = {k: statistics.median(v) for k, v in res.items() if v}
        print('\nmedians over %d runs, %d MB blob (1 MiB chunks, 4 in flight):' % (a.runs, a.size_mb))
        for k in (k for k in keys if k in med):
            print('  %-14s %6.2f s  %7.1f MB/s  %5.1fx cp  %5.1fx cp+sync'
                  % (k, med[k], mb / med[k], med[k] / med['cp'], med[k] / med['cp_sync']))
        for i in sorted(hwm):
            print('  p%d memory: high-water mark %.1f MB, resident now %.1f MB'
                  % (i, hwm[i].get('VmHWM', 0), hwm[i].get('VmRSS', 0)))
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
