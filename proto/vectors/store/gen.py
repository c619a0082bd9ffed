#!/usr/bin/env python3
"""Test vectors for the store messages (proto/store.md), written with a
small canonical msgpack encoder of its own (independent of src/mpack.c).
Writes proto/vectors/store/store.txt and the fuzz seeds
tests/fuzz/corpus/store/v-*. Run from the repository root."""
import os, struct

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

def bn(b):
    n = len(b)
    if n <= 0xff: return b'\xc4' + bytes([n]) + b
    return b'\xc5' + struct.pack('>H', n) + b

def arr(items):
    n = len(items)
    h = bytes([0x90 | n]) if n < 16 else b'\xdc' + struct.pack('>H', n)
    return h + b''.join(items)

def mp(pairs):
    n = len(pairs)
    h = bytes([0x80 | n]) if n < 16 else b'\xde' + struct.pack('>H', n)
    return h + b''.join(uint(k) + v for k, v in pairs)

NIL, T, F = b'\xc0', b'\xc3', b'\xc2'
def pairs(lst): return arr([uint(x) for p in lst for x in p])

def digest(sender, vv, retired=(), reply=False, reset=False, addr=''):
    return mp([(0, uint(sender)), (1, T if reply else F), (2, pairs(vv)), (3, pairs(retired)),
               (4, T if reset else F), (5, s(addr))])

def lww(ridx, seq, key, hlc, val):
    return arr([uint(1), uint(ridx), uint(seq), s(key), uint(hlc), NIL if val is None else bn(val)])
def add(ridx, seq, key, elem): return arr([uint(2), uint(ridx), uint(seq), s(key), bn(elem)])
def ctr(ridx, seq, key, p, n): return arr([uint(3), uint(ridx), uint(seq), s(key), uint(p), uint(n)])
def field(ridx, seq, key, hlc, name, val):
    return arr([uint(4), uint(ridx), uint(seq), s(key), uint(hlc), bn(name), bn(val)])
def dead(ridx, seq, key, typ, elem, ctx):
    return arr([uint(5), uint(ridx), uint(seq), s(key), uint(typ), NIL if elem is None else bn(elem),
                pairs(ctx)])

def summary(sender, fp, reply=False, addr=''):
    return mp([(0, uint(sender)), (1, T if reply else F), (2, uint(fp)), (3, s(addr))])

def delta(sender, ranges, items): return mp([(0, uint(sender)), (1, pairs(ranges)), (2, arr(items))])
def snap(sender, sid, chunk, chunks, flags, vv, retired, items):
    return mp([(0, uint(sender)), (1, uint(sid)), (2, uint(chunk)), (3, uint(chunks)), (4, uint(flags)),
               (5, pairs(vv)), (6, pairs(retired)), (7, arr(items))])

H = {16: '534c0110', 17: '534c0111', 18: '534c0112', 19: '534c0113'}
HLC = 0x0192a3b4c5d60001
lines, seeds = [], []
def valid(name, t, body):
    lines.append('valid %s %s %s' % (name, H[t], body.hex())); seeds.append((name, t, body))
def compat(name, t, body, re):
    lines.append('compat %s %s %s %s' % (name, H[t], body.hex(), re.hex())); seeds.append((name, t, body))
def invalid(name, err, t, body):
    lines.append('invalid %s %s %s %s' % (name, err, H[t], body.hex())); seeds.append((name, t, body))

A, B, C = 0x0000000100000001, 0x0000000200000003, 0x7fffffffffffffff
valid('digest-empty', 16, digest(A, []))
valid('digest-two', 16, digest(A, [(A, 5), (B, 300)], reply=True))
valid('digest-retired-reset', 16, digest(B, [(B, 1)], retired=[(A, 70000)], reset=True,
      addr='tcp://10.0.0.7:7600'))
valid('delta-lww', 17, delta(A, [(A, 4, 5)], [lww(0, 5, 'study/s1/trial/7/claim', HLC, b'x' * 64)]))
valid('delta-tombstone', 17, delta(A, [(A, 5, 6)], [lww(0, 6, 'k', HLC + 1, None)]))
valid('delta-empty-value', 17, delta(A, [(A, 0, 1)], [lww(0, 1, 'k', 1, b'')]))
valid('delta-set-add', 17, delta(B, [(B, 9, 10)], [add(0, 10, 'set', b'e1')]))
valid('delta-counter', 17, delta(B, [(B, 1, 2)], [ctr(0, 2, 'ctr', 5, 3)]))
valid('delta-gmap', 17, delta(A, [(A, 1, 2)], [field(0, 2, 'metrics/t7', HLC, b'epoch/3', b'0.91')]))
valid('delta-dead-elem', 17, delta(A, [(A, 2, 3)], [dead(0, 3, 'set', 2, b'e1', [(A, 1), (B, 10)])]))
valid('delta-dead-all', 17, delta(A, [(A, 3, 4)], [dead(0, 4, 'ctr', 3, None, [(B, 2)])]))
valid('delta-two-ranges', 17, delta(A, [(A, 10, 12), (B, 0, 40)],
      [lww(0, 12, 'a', HLC, b'1'), lww(1, 40, 'b', HLC, b'2'), add(1, 39, 's', b'z')]))
valid('delta-ranges-only', 17, delta(C, [(A, 1, 1000)], []))
valid('snapshot-one', 18, snap(A, 77, 0, 1, 0, [(A, 3), (B, 2)], [(C, 9)],
      [lww(0, 3, 'k1', HLC, b'v'), ctr(1, 2, 'c', 1, 0), add(2, 9, 's', b'e')]))
valid('snapshot-reset-chunk', 18, snap(B, 1, 2, 5, 1, [(B, 20)], [], [lww(0, 20, 'k', HLC, b'v')]))
compat('digest-unknown-key', 16,
       mp([(0, uint(A)), (1, F), (2, pairs([])), (3, pairs([])), (4, F), (5, s('')), (9, arr([uint(1)]))]),
       digest(A, []))

d = delta(A, [(A, 4, 5)], [lww(0, 5, 'k', HLC, b'v')])
invalid('truncated', 'SL_ETRUNC', 17, d[:-1])
invalid('dot-above-range', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [lww(0, 6, 'k', HLC, b'v')]))
invalid('dot-at-from', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [lww(0, 4, 'k', HLC, b'v')]))
invalid('range-empty', 'SL_EPROTO', 17, delta(A, [(A, 5, 5)], []))
invalid('ranges-not-ascending', 'SL_EPROTO', 17, delta(A, [(B, 0, 1), (A, 0, 1)], []))
invalid('ridx-out-of-range', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [lww(1, 5, 'k', HLC, b'v')]))
invalid('key-empty', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [lww(0, 5, '', HLC, b'v')]))
invalid('key-513', 'SL_ETOOBIG', 17, delta(A, [(A, 4, 5)], [lww(0, 5, 'k' * 513, HLC, b'v')]))
invalid('key-bad-utf8', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [lww(0, 5, b'\xc3\x28', HLC, b'v')]))
invalid('value-65537', 'SL_ETOOBIG', 17, mp([(0, uint(A)), (1, pairs([(A, 4, 5)])),
        (2, arr([arr([uint(1), uint(0), uint(5), s('k'), uint(1), b'\xc6' + struct.pack('>I', 65537)])]))]))
invalid('kind-unknown', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [arr([uint(6), uint(0), uint(5), s('k'), uint(1), NIL])]))
invalid('arity-wrong', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [arr([uint(1), uint(0), uint(5), s('k'), uint(1)])]))
invalid('dead-on-register', 'SL_EPROTO', 17, delta(A, [(A, 3, 4)], [dead(0, 4, 'k', 1, None, [(B, 2)])]))
invalid('dead-ctx-empty', 'SL_EPROTO', 17, delta(A, [(A, 3, 4)], [dead(0, 4, 'k', 3, None, [])]))
invalid('dead-ctx-not-ascending', 'SL_EPROTO', 17, delta(A, [(A, 3, 4)], [dead(0, 4, 'k', 2, None, [(B, 1), (A, 1)])]))
invalid('dead-elem-on-counter', 'SL_EPROTO', 17, delta(A, [(A, 3, 4)], [dead(0, 4, 'k', 3, b'e', [(B, 1)])]))
invalid('set-add-nil', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [arr([uint(2), uint(0), uint(5), s('k'), NIL])]))
invalid('seq-noncanonical', 'SL_ENONCANON', 17, delta(A, [(A, 4, 5)], [arr([uint(1), uint(0), b'\xcc\x05', s('k'), uint(1), NIL])]))
invalid('keys-out-of-order', 'SL_ENONCANON', 17, mp([(1, pairs([])), (0, uint(A)), (2, arr([]))]))
invalid('duplicate-key', 'SL_EPROTO', 17, mp([(0, uint(A)), (0, uint(A)), (1, pairs([])), (2, arr([]))]))
invalid('missing-items', 'SL_EPROTO', 17, mp([(0, uint(A)), (1, pairs([]))]))
invalid('sender-zero', 'SL_EPROTO', 17, delta(0, [], []))
invalid('trailing-bytes', 'SL_EPROTO', 17, d + NIL)
invalid('items-count-lies', 'SL_ETRUNC', 17, mp([(0, uint(A)), (1, pairs([])), (2, b'\xdd\x00\x10\x00\x00')]))
invalid('digest-not-bool', 'SL_EPROTO', 16, mp([(0, uint(A)), (1, uint(1)), (2, pairs([])), (3, pairs([])), (4, F), (5, s(''))]))
invalid('digest-odd-pairs', 'SL_EPROTO', 16, mp([(0, uint(A)), (1, F), (2, arr([uint(A)])), (3, pairs([])), (4, F), (5, s(''))]))
invalid('digest-float', 'SL_EPROTO', 16, mp([(0, uint(A)), (1, F), (2, pairs([])), (3, pairs([])), (4, F), (5, s('')), (6, b'\xcb' + bytes(8))]))
invalid('digest-missing-addr', 'SL_EPROTO', 16, mp([(0, uint(A)), (1, F), (2, pairs([])), (3, pairs([])), (4, F)]))
invalid('digest-addr-129', 'SL_ETOOBIG', 16, digest(A, [], addr='a' * 129))
invalid('digest-addr-control', 'SL_EPROTO', 16, digest(A, [], addr='tcp://x\n'))
valid('summary', 19, summary(A, 0x9e3779b97f4a7c15, addr='tcp://127.0.0.1:7600'))
valid('summary-reply', 19, summary(B, 1, reply=True))
invalid('summary-fp-zero', 'SL_EPROTO', 19, summary(A, 0))
invalid('summary-missing-addr', 'SL_EPROTO', 19, mp([(0, uint(A)), (1, F), (2, uint(5))]))
invalid('summary-addr-control', 'SL_EPROTO', 19, summary(A, 5, addr='tcp://x\x7f'))
invalid('snapshot-chunk-past-count', 'SL_EPROTO', 18, snap(A, 1, 3, 3, 0, [(A, 1)], [], []))
invalid('snapshot-vv-and-retired', 'SL_EPROTO', 18, snap(A, 1, 0, 1, 0, [(A, 1)], [(A, 1)], []))
invalid('snapshot-flag-unknown', 'SL_EPROTO', 18, snap(A, 1, 0, 1, 2, [(A, 1)], [], []))
invalid('snapshot-dot-above-vv', 'SL_EPROTO', 18, snap(A, 1, 0, 1, 0, [(A, 1)], [], [lww(0, 2, 'k', 1, b'')]))

# Range and pair arrays (store.md 3): each malformed one with its error.
F64 = b'\xcb' + struct.pack('>d', 1.5)
def delta_raw(ranges_arr): return mp([(0, uint(A)), (1, ranges_arr), (2, arr([]))])
invalid('ranges-count-not-triples', 'SL_EPROTO', 17, delta_raw(arr([uint(A), uint(0), uint(1), uint(B)])))
invalid('range-rid-zero', 'SL_EPROTO', 17, delta(A, [(0, 0, 1)], []))
invalid('ranges-rid-repeated', 'SL_EPROTO', 17, delta(A, [(A, 0, 1), (A, 1, 2)], []))
invalid('range-from-above-to', 'SL_EPROTO', 17, delta(A, [(A, 6, 5)], []))
invalid('ranges-4097', 'SL_ETOOBIG', 17, delta_raw(b'\xdc' + struct.pack('>H', 3 * 4097)))
invalid('ranges-count-lies', 'SL_ETRUNC', 17, delta_raw(b'\xdc' + struct.pack('>H', 3 * 100) + uint(A) + uint(0) + uint(1)))
invalid('range-negative', 'SL_EPROTO', 17, delta_raw(arr([uint(A), b'\xff', uint(1)])))
invalid('range-bin', 'SL_EPROTO', 17, delta_raw(arr([uint(A), uint(0), bn(b'\x01')])))
invalid('range-noncanonical', 'SL_ENONCANON', 17, delta_raw(arr([uint(A), b'\xcd\x00\x05', uint(6)])))
invalid('range-float', 'SL_EPROTO', 17, delta_raw(arr([uint(A), uint(0), F64])))
invalid('digest-vv-4097', 'SL_ETOOBIG', 16, mp([(0, uint(A)), (1, F), (2, b'\xdc' + struct.pack('>H', 2 * 4097)), (3, pairs([])), (4, F), (5, s(''))]))
invalid('digest-vv-rid-zero', 'SL_EPROTO', 16, digest(A, [(0, 5)]))
invalid('digest-vv-not-ascending', 'SL_EPROTO', 16, digest(A, [(B, 5), (A, 5)]))
invalid('digest-retired-rid-repeated', 'SL_EPROTO', 16, digest(A, [], retired=[(B, 5), (B, 6)]))
invalid('snapshot-retired-not-ascending', 'SL_EPROTO', 18, snap(A, 1, 0, 1, 0, [], [(B, 1), (A, 1)], []))

# Floats (envelope.md 3, rule 5): none in a store message, anywhere, float32 included.
invalid('float-as-value', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [arr([uint(1), uint(0), uint(5), s('k'), uint(1), F64])]))
invalid('float-as-hlc', 'SL_EPROTO', 17, delta(A, [(A, 4, 5)], [arr([uint(1), uint(0), uint(5), s('k'), F64, NIL])]))
invalid('float32-unknown-key', 'SL_EPROTO', 17, mp([(0, uint(A)), (1, pairs([])), (2, arr([])), (3, b'\xca' + struct.pack('>f', 1.5))]))
invalid('float-nested-unknown-key', 'SL_EPROTO', 19, mp([(0, uint(A)), (1, F), (2, uint(5)), (3, s('')), (4, arr([mp([(0, F64)])]))]))
invalid('snapshot-float-sender', 'SL_EPROTO', 18, mp([(0, F64), (1, uint(1)), (2, uint(0)), (3, uint(1)), (4, uint(0)), (5, pairs([])), (6, pairs([])), (7, arr([]))]))

# Reply addresses: empty is valid (store.md 3.1: the message gets no answer).
valid('summary-no-reply-to', 19, summary(A, 7))
valid('digest-reply-no-reply-to', 16, digest(B, [(B, 4)], reply=True))

# A type the store does not define (store.md 2): its decoder says SL_ETYPE (a peer
# drops it before: envelope.md 2.1).
H[20] = '534c0114'
invalid('type-20-reserved', 'SL_ETYPE', 20, digest(A, []))

root = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(root, 'store.txt'), 'w') as f:
    f.write('# Starling wire test vectors: store messages (proto/store.md). Generated by\n'
            '# proto/vectors/store/gen.py; format in proto/vectors/README.md. Do not edit by\n'
            '# hand. Run by tests/store_test.c (and not by msg_test: types 16..19).\n')
    f.write('\n'.join(lines) + '\n')
corpus = os.path.join(root, '..', '..', '..', 'tests', 'fuzz', 'corpus', 'store')
os.makedirs(corpus, exist_ok=True)
for name, t, body in seeds:
    with open(os.path.join(corpus, 'v-' + name), 'wb') as f:
        f.write(bytes([t]) + body)
    with open(os.path.join(corpus, 's-' + name), 'wb') as f:  # also delivered to a store
        f.write(bytes([t | 0x80]) + body)
