#!/usr/bin/env python3
"""Test vectors for the blob messages (proto/blob.md), written with a
small canonical msgpack encoder of its own (independent of src/mpack.c).
Writes proto/vectors/blob/blob.txt and the fuzz seeds
tests/fuzz/corpus/blob/v-*. Run from the repository root."""
import hashlib, os, struct

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
    if n <= 0xffff: return b'\xc5' + struct.pack('>H', n) + b
    return b'\xc6' + struct.pack('>I', n) + b

def arr(items):
    n = len(items)
    h = bytes([0x90 | n]) if n < 16 else b'\xdc' + struct.pack('>H', n)
    return h + b''.join(items)

def mp(pairs):
    n = len(pairs)
    h = bytes([0x80 | n]) if n < 16 else b'\xde' + struct.pack('>H', n)
    return h + b''.join(uint(k) + v for k, v in pairs)

def b2(data): return hashlib.blake2b(data, digest_size=32).digest()

def get(xfer, blob, index, chunk, addr):
    return mp([(0, uint(xfer)), (1, bn(blob)), (2, uint(index)), (3, bn(chunk)), (4, s(addr))])
def chunk(xfer, index, h, status, data):
    return mp([(0, uint(xfer)), (1, uint(index)), (2, bn(h)), (3, uint(status)), (4, bn(data))])
def manifest(content, chunk_len):
    cs = [content[i:i + chunk_len] for i in range(0, len(content), chunk_len)]
    return mp([(0, bn(b2(content))), (1, uint(len(content))), (2, uint(chunk_len)),
               (3, arr([bn(b2(c)) for c in cs]))])
def offer(man, addr): return mp([(0, bn(man)), (1, s(addr))])

H = {24: '534c0118', 25: '534c0119', 26: '534c011a', 27: '534c011b'}
lines, seeds = [], []
def valid(name, t, body):
    lines.append('valid %s %s %s' % (name, H[t], body.hex())); seeds.append((name, t, body))
def compat(name, t, body, re):
    lines.append('compat %s %s %s %s' % (name, H[t], body.hex(), re.hex())); seeds.append((name, t, body))
def invalid(name, err, t, body):
    lines.append('invalid %s %s %s %s' % (name, err, H[t], body.hex())); seeds.append((name, t, body))

DATA = b'starling blob chunk\n' * 3
BLOB = b2(DATA)
CH = b2(DATA[:32])
X = 0x1122334455667788
ADDR = 'tcp://127.0.0.1:7600'
MAN = manifest(DATA, 32)

valid('get', 24, get(X, BLOB, 0, CH, ADDR))
valid('get-last-index', 24, get(1, BLOB, 65535, CH, 'tcp://[::1]:7600'))
valid('chunk-ok', 25, chunk(X, 0, CH, 0, DATA[:32]))
valid('chunk-missing', 25, chunk(X, 7, CH, 1, b''))
valid('chunk-300', 25, chunk(5, 1, b2(b'z' * 300), 0, b'z' * 300))
valid('offer', 26, offer(MAN, ADDR))
valid('offer-empty-blob', 26, offer(manifest(b'', 1 << 20), ADDR))
compat('get-unknown-key', 24, mp([(0, uint(X)), (1, bn(BLOB)), (2, uint(0)), (3, bn(CH)), (4, s(ADDR)), (9, uint(1))]),
       get(X, BLOB, 0, CH, ADDR))
compat('offer-unknown-key', 26, mp([(0, bn(MAN)), (1, s(ADDR)), (5, arr([]))]), offer(MAN, ADDR))

g = get(X, BLOB, 0, CH, ADDR)
invalid('truncated', 'SL_ETRUNC', 24, g[:-1])
invalid('type-unknown', 'SL_ETYPE', 27, g)
invalid('get-missing-addr', 'SL_EPROTO', 24, mp([(0, uint(X)), (1, bn(BLOB)), (2, uint(0)), (3, bn(CH))]))
invalid('get-hash-31', 'SL_EPROTO', 24, get(X, BLOB[:31], 0, CH, ADDR))
invalid('get-hash-33', 'SL_ETOOBIG', 24, get(X, BLOB + b'\0', 0, CH, ADDR))
invalid('get-index-65536', 'SL_EPROTO', 24, get(X, BLOB, 65536, CH, ADDR))
invalid('get-addr-empty', 'SL_EPROTO', 24, get(X, BLOB, 0, CH, ''))
invalid('get-addr-129', 'SL_ETOOBIG', 24, get(X, BLOB, 0, CH, 'a' * 129))
invalid('get-addr-control', 'SL_EPROTO', 24, get(X, BLOB, 0, CH, 'tcp://x\n'))
invalid('get-keys-out-of-order', 'SL_ENONCANON', 24, mp([(1, bn(BLOB)), (0, uint(X)), (2, uint(0)), (3, bn(CH)), (4, s(ADDR))]))
invalid('get-key-duplicate', 'SL_EPROTO', 24, mp([(0, uint(X)), (0, uint(X)), (1, bn(BLOB)), (2, uint(0)), (3, bn(CH)), (4, s(ADDR))]))
invalid('get-xfer-noncanonical', 'SL_ENONCANON', 24, mp([(0, b'\xcf' + struct.pack('>Q', 5)), (1, bn(BLOB)), (2, uint(0)), (3, bn(CH)), (4, s(ADDR))]))
invalid('get-not-a-map', 'SL_EPROTO', 24, arr([uint(1)]))
invalid('get-trailing-bytes', 'SL_EPROTO', 24, g + b'\x00')
invalid('chunk-status-2', 'SL_EPROTO', 25, chunk(X, 0, CH, 2, b''))
invalid('chunk-missing-with-data', 'SL_EPROTO', 25, chunk(X, 0, CH, 1, b'x'))
invalid('chunk-data-str', 'SL_EPROTO', 25, mp([(0, uint(X)), (1, uint(0)), (2, bn(CH)), (3, uint(0)), (4, s('abc'))]))
invalid('chunk-data-over-1mib', 'SL_ETOOBIG', 25, mp([(0, uint(X)), (1, uint(0)), (2, bn(CH)), (3, uint(0))]) [:0] +
        b'\x85' + uint(0) + uint(X) + uint(1) + uint(0) + uint(2) + bn(CH) + uint(3) + uint(0) + uint(4) + b'\xc6' + struct.pack('>I', (1 << 20) + 1))
invalid('offer-manifest-bad', 'SL_EPROTO', 26, offer(mp([(0, bn(BLOB)), (1, uint(3)), (2, uint(1)), (3, arr([]))]), ADDR))
invalid('offer-manifest-empty', 'SL_EPROTO', 26, offer(b'', ADDR)[:0] + mp([(0, bn(b'')), (1, s(ADDR))]))
invalid('offer-missing-addr', 'SL_EPROTO', 26, mp([(0, bn(MAN))]))

# A bad manifest inside an OFFER (blob.md 3.3): the OFFER gets the error the
# manifest's own decoding gives, by the same profile and limits.
def man(h=BLOB, size=len(DATA), clen=32, chunks=None, extra=()):
    cs = chunks if chunks is not None else [bn(b2(DATA[i:i + 32])) for i in range(0, len(DATA), 32)]
    return mp([(0, bn(h)), (1, uint(size)), (2, uint(clen)), (3, arr(cs))] + list(extra))
F64 = b'\xcb' + struct.pack('>d', 1.5)
invalid('offer-manifest-not-map', 'SL_EPROTO', 26, offer(arr([uint(1)]), ADDR))
invalid('offer-manifest-missing-chunks', 'SL_EPROTO', 26, offer(mp([(0, bn(BLOB)), (1, uint(3)), (2, uint(1))]), ADDR))
invalid('offer-manifest-hash-31', 'SL_EPROTO', 26, offer(man(h=BLOB[:31]), ADDR))
invalid('offer-manifest-hash-33', 'SL_ETOOBIG', 26, offer(man(h=BLOB + b'\0'), ADDR))
invalid('offer-manifest-chunk-len-0', 'SL_EPROTO', 26, offer(man(clen=0, chunks=[]), ADDR))
invalid('offer-manifest-too-many-chunks', 'SL_EPROTO', 26, offer(man(size=32), ADDR))
invalid('offer-manifest-chunk-hash-31', 'SL_EPROTO', 26, offer(man(chunks=[bn(CH[:31]), bn(CH)], extra=[(4, bn(b'pad'))]), ADDR))
# chunk hashes are counted at 34 octets each (bin8 head, length, 32) against the octets left
invalid('offer-manifest-chunks-short', 'SL_ETRUNC', 26, offer(man(chunks=[bn(CH[:31])] * 2), ADDR))
invalid('offer-manifest-65537-chunks', 'SL_ETOOBIG', 26, offer(mp([(0, bn(BLOB)), (1, uint(65537)), (2, uint(1)),
        (3, b'\xdd' + struct.pack('>I', 65537))]), ADDR))
invalid('offer-manifest-count-lies', 'SL_ETRUNC', 26, offer(mp([(0, bn(BLOB)), (1, uint(100)), (2, uint(1)),
        (3, b'\xdc' + struct.pack('>H', 100) + bn(CH))]), ADDR))
invalid('offer-manifest-noncanonical', 'SL_ENONCANON', 26, offer(mp([(0, bn(BLOB)), (1, b'\xcc\x05'), (2, uint(32)),
        (3, arr([bn(CH)]))]), ADDR))
invalid('offer-manifest-keys-out-of-order', 'SL_ENONCANON', 26, offer(mp([(1, uint(len(DATA))), (0, bn(BLOB)), (2, uint(32)),
        (3, arr([bn(b2(DATA[i:i + 32])) for i in range(0, len(DATA), 32)]))]), ADDR))
invalid('offer-manifest-trailing-bytes', 'SL_EPROTO', 26, offer(MAN + b'\xc0', ADDR))
invalid('offer-manifest-float', 'SL_EPROTO', 26, offer(man(extra=[(4, F64)]), ADDR))
invalid('offer-manifest-9-keys', 'SL_ETOOBIG', 26, offer(man(extra=[(k, uint(0)) for k in range(4, 9)]), ADDR))
invalid('offer-manifest-65537-bytes', 'SL_ETOOBIG', 26, mp([(0, b'\xc6' + struct.pack('>I', 65537)), (1, s(ADDR))]))

# Floats (envelope.md 3, rule 5): none in a blob message, anywhere, float32 included.
invalid('get-float-unknown-key', 'SL_EPROTO', 24, mp([(0, uint(X)), (1, bn(BLOB)), (2, uint(0)), (3, bn(CH)), (4, s(ADDR)), (5, F64)]))
invalid('chunk-float32-index', 'SL_EPROTO', 25, mp([(0, uint(X)), (1, b'\xca' + struct.pack('>f', 1.0)), (2, bn(CH)), (3, uint(1)), (4, bn(b''))]))
invalid('offer-float-nested-unknown-key', 'SL_EPROTO', 26, mp([(0, bn(MAN)), (1, s(ADDR)), (2, arr([arr([F64])]))]))

root = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(root, 'blob.txt'), 'w') as f:
    f.write('# Starling wire test vectors: blob messages (proto/blob.md). Generated by\n'
            '# proto/vectors/blob/gen.py; format in proto/vectors/README.md. Do not edit by\n'
            '# hand. Run by tests/blob_xfer_test.c (and not by msg_test: types 24..26).\n')
    f.write('\n'.join(lines) + '\n')
corpus = os.path.join(root, '..', '..', '..', 'tests', 'fuzz', 'corpus', 'blob')
os.makedirs(corpus, exist_ok=True)
for name, t, body in seeds:
    with open(os.path.join(corpus, 'v-' + name), 'wb') as f:
        f.write(bytes([t - 24]) + body)
