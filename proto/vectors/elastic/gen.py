#!/usr/bin/env python3
"""Test vectors for the elastic job's store records (proto/elastic.md),
written with a small canonical msgpack encoder of its own (independent of
src/wire/mpack.c). Writes proto/vectors/elastic/elastic.txt and the fuzz
seeds tests/fuzz/corpus/elastic/v-*. Run from anywhere.

Line format: `valid NAME KEY HEX`, `compat NAME KEY HEX CANONICAL-HEX` (an
unknown key, dropped on re-encoding), `invalid NAME ERROR KEY HEX`. Values
are decoded with max_nodes 4. tests/elastic_job_records_test.c runs them."""
import os, struct

J = '0123456789abcdef'

def uint(v):
    if v < 128: return bytes([v])
    if v <= 0xff: return b'\xcc' + bytes([v])
    if v <= 0xffff: return b'\xcd' + struct.pack('>H', v)
    if v <= 0xffffffff: return b'\xce' + struct.pack('>I', v)
    return b'\xcf' + struct.pack('>Q', v)

def s(t):
    b = t.encode() if isinstance(t, str) else t
    n = len(b)
    if n < 32: return bytes([0xa0 | n]) + b
    if n <= 0xff: return b'\xd9' + bytes([n]) + b
    return b'\xda' + struct.pack('>H', n) + b

def arr(items):
    n = len(items)
    h = bytes([0x90 | n]) if n < 16 else b'\xdc' + struct.pack('>H', n)
    return h + b''.join(items)

def mp(pairs):
    n = len(pairs)
    h = bytes([0x80 | n]) if n < 16 else b'\xde' + struct.pack('>H', n)
    return h + b''.join(uint(k) + v for k, v in pairs)

T, F, F64 = b'\xc3', b'\xc2', b'\xcb' + struct.pack('>d', 1.5)

def vol(r): return mp([(0, uint(r))])
def world(pr, pl, members): return mp([(0, uint(pr)), (1, s(pl)), (2, arr([s(m) for m in members]))])
def graft(members, gr, gl, pr=0, pl=''):
    return mp([(0, uint(pr)), (1, s(pl)), (2, arr([s(m) for m in members])), (3, uint(gr)),
               (4, s(gl))])
def ack(wl, tr, tl, step, has, sr, sl):
    return mp([(0, s(wl)), (1, uint(tr)), (2, s(tl)), (3, uint(step)), (4, T if has else F),
               (5, uint(sr)), (6, s(sl))])

lines, seeds = [], []
def valid(name, key, val):
    lines.append('valid %s %s %s' % (name, key, val.hex()))
    seeds.append((name, key, val))
def compat(name, key, val, canon):
    lines.append('compat %s %s %s %s' % (name, key, val.hex(), canon.hex()))
    seeds.append((name, key, val))
def invalid(name, err, key, val):
    lines.append('invalid %s %s %s %s' % (name, err, key, val.hex() or '-'))
    seeds.append((name, key, val))

K = 'job/' + J + '/'
valid('vol', K + 'vol/p1', vol(5))
valid('vol-max-round', K + 'vol/p1', vol(2**53 - 1))
valid('world-root', K + 'w/1/a', world(0, '', ['a', 'b']))
valid('world-child', K + 'w/3/b', world(2, 'a', ['a', 'b', 'c']))
valid('world-peer-with-slash', K + 'w/4/10.0.0.7:7600/x', world(3, 'b', ['10.0.0.7:7600/x', 'b']))
valid('ack-joiner', K + 'ack/3/c', ack('b', 0, '', 300, True, 2, 'a'))
valid('ack-first', K + 'ack/1/a', ack('a', 0, '', 0, False, 0, ''))
valid('cancel', K + 'cancel', mp([]))
compat('vol-unknown-key', K + 'vol/p1', mp([(0, uint(5)), (1, arr([]))]), vol(5))
compat('cancel-unknown-key', K + 'cancel', mp([(3, s('by p1'))]), mp([]))

invalid('vol-round-zero', 'SL_EPROTO', K + 'vol/p1', vol(0))
invalid('vol-round-2-53', 'SL_EPROTO', K + 'vol/p1', vol(2**53))
invalid('vol-uint8-5', 'SL_ENONCANON', K + 'vol/p1', b'\x81\x00\xcc\x05')
invalid('vol-float-unknown-key', 'SL_EPROTO', K + 'vol/p1', mp([(0, uint(5)), (1, F64)]))
invalid('vol-missing', 'SL_EPROTO', K + 'vol/p1', mp([]))
invalid('vol-empty', 'SL_ETRUNC', K + 'vol/p1', b'')
invalid('vol-trailing-byte', 'SL_EPROTO', K + 'vol/p1', vol(5) + b'\x00')
invalid('world-no-member', 'SL_EPROTO', K + 'w/3/b', world(2, 'a', []))
invalid('world-five-members', 'SL_ETOOBIG', K + 'w/3/b', world(2, 'a', ['a', 'b', 'c', 'd', 'e']))
invalid('world-duplicate-member', 'SL_EPROTO', K + 'w/3/b', world(2, 'a', ['a', 'a']))
invalid('world-parent-not-below', 'SL_EPROTO', K + 'w/3/b', world(3, 'a', ['a']))
invalid('world-root-with-leader', 'SL_EPROTO', K + 'w/3/b', world(0, 'a', ['a']))
invalid('world-member-control-char', 'SL_EPROTO', K + 'w/3/b', world(2, 'a', ['a\tb']))
valid('world-graft', K + 'w/5/c', graft(['b', 'c'], 3, 'a'))
invalid('world-graft-with-parent', 'SL_EPROTO', K + 'w/5/c', graft(['b', 'c'], 3, 'a', 4, 'b'))
invalid('world-graft-not-below', 'SL_EPROTO', K + 'w/5/c', graft(['b', 'c'], 5, 'a'))
invalid('world-graft-round-zero', 'SL_EPROTO', K + 'w/5/c', graft(['b', 'c'], 0, ''))
invalid('world-graft-no-leader', 'SL_EPROTO', K + 'w/5/c',
        mp([(0, uint(0)), (1, s('')), (2, arr([s('b')])), (3, uint(3))]))
invalid('world-graft-empty-leader', 'SL_EPROTO', K + 'w/5/c', graft(['b'], 3, ''))
invalid('world-keys-out-of-order', 'SL_ENONCANON', K + 'w/3/b',
        b'\x83' + uint(1) + s('a') + uint(0) + uint(2) + uint(2) + arr([s('a')]))
invalid('ack-tip-not-below', 'SL_EPROTO', K + 'ack/3/c', ack('b', 3, 'b', 0, False, 0, ''))
invalid('ack-int-as-bool', 'SL_EPROTO', K + 'ack/3/c',
        mp([(0, s('b')), (1, uint(0)), (2, s('')), (3, uint(0)), (4, uint(1)), (5, uint(0)), (6, s(''))]))
invalid('ack-missing-state-world', 'SL_EPROTO', K + 'ack/3/c',
        mp([(0, s('b')), (1, uint(0)), (2, s('')), (3, uint(0)), (4, F), (5, uint(0))]))
invalid('ack-truncated', 'SL_ETRUNC', K + 'ack/3/c', ack('b', 0, '', 300, True, 2, 'a')[:-1])
invalid('cancel-not-a-map', 'SL_EPROTO', K + 'cancel', arr([]))
invalid('key-round-leading-zero', 'SL_EPROTO', K + 'w/03/b', world(2, 'a', ['a']))
invalid('key-upper-case-job', 'SL_EPROTO', 'job/0123456789ABCDEF/vol/p1', vol(5))
invalid('key-unknown-record', 'SL_EPROTO', K + 'votes/p1', vol(5))

root = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(root, 'elastic.txt'), 'w') as f:
    f.write('# Starling test vectors: elastic job records (proto/elastic.md). Generated by\n'
            '# proto/vectors/elastic/gen.py (format in its docstring). Do not edit by hand.\n'
            '# Run by tests/elastic_job_records_test.c; values decoded with max_nodes 4.\n')
    f.write('\n'.join(lines) + '\n')
# fuzz seeds (tests/fuzz/fuzz_elastic.c): byte 0 = 1 (one record), KEY, NUL, VALUE
corpus = os.path.join(root, '..', '..', '..', 'tests', 'fuzz', 'corpus', 'elastic')
os.makedirs(corpus, exist_ok=True)
for name, key, val in seeds:
    with open(os.path.join(corpus, 'v-' + name), 'wb') as f:
        f.write(b'\x01' + key.encode() + b'\x00' + val)
