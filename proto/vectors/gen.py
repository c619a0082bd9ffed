#!/usr/bin/env python3
"""Generates the hex test vectors in proto/vectors/*.txt.

The bytes come from this file's own small canonical msgpack encoder, written
from proto/envelope.md independently of the C codec, so the C tests
(tests/msg_test.c) check the C codec against a second reading of the spec.
The invalid vectors are built by hand from the same pieces, each with the
error the spec says a receiver reports. Run it from anywhere; it rewrites
the files next to it. Format: see proto/vectors/README.md.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

PING, PING_REQ, ACK, NACK, SYNC, CTL_REQ, CTL_REP = 1, 2, 3, 4, 5, 64, 65


class Raw(bytes):
    """Bytes inserted verbatim (a hand-made, possibly invalid, encoding)."""


def enc(v):
    """Canonical msgpack (proto/envelope.md, "Canonical msgpack profile")."""
    if isinstance(v, Raw):
        return bytes(v)
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 0x80:
            return bytes([v])
        if 0 <= v < 0x100:
            return b"\xcc" + struct.pack(">B", v)
        if 0 <= v < 0x10000:
            return b"\xcd" + struct.pack(">H", v)
        if 0 <= v < 0x100000000:
            return b"\xce" + struct.pack(">I", v)
        if 0 <= v:
            return b"\xcf" + struct.pack(">Q", v)
        if v >= -32:
            return struct.pack(">b", v)
        if v >= -128:
            return b"\xd0" + struct.pack(">b", v)
        if v >= -32768:
            return b"\xd1" + struct.pack(">h", v)
        if v >= -(1 << 31):
            return b"\xd2" + struct.pack(">i", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return str_head(len(b)) + b
    if isinstance(v, bytes):
        n = len(v)
        if n < 0x100:
            h = b"\xc4" + struct.pack(">B", n)
        elif n < 0x10000:
            h = b"\xc5" + struct.pack(">H", n)
        else:
            h = b"\xc6" + struct.pack(">I", n)
        return h + v
    if isinstance(v, list):
        return arr_head(len(v)) + b"".join(enc(x) for x in v)
    if isinstance(v, dict):
        keys = list(v.keys())
        if all(isinstance(k, int) for k in keys):
            keys.sort()
        else:
            keys.sort(key=lambda k: k.encode("utf-8"))
        return map_head(len(keys)) + b"".join(enc(k) + enc(v[k]) for k in keys)
    raise TypeError(type(v))


def str_head(n):
    if n < 32:
        return bytes([0xA0 | n])
    if n < 0x100:
        return b"\xd9" + struct.pack(">B", n)
    if n < 0x10000:
        return b"\xda" + struct.pack(">H", n)
    return b"\xdb" + struct.pack(">I", n)


def arr_head(n):
    if n < 16:
        return bytes([0x90 | n])
    if n < 0x10000:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def map_head(n):
    if n < 16:
        return bytes([0x80 | n])
    if n < 0x10000:
        return b"\xde" + struct.pack(">H", n)
    return b"\xdf" + struct.pack(">I", n)


def pairs(items):
    """A map from (key, value) pairs in the order given (no sorting)."""
    return Raw(map_head(len(items)) + b"".join(enc(k) + enc(v) for k, v in items))


def hdr(t, version=1, magic=b"SL"):
    return magic + bytes([version, t])


def member(name, addr, inc=1, state=0, meta=None, frm=""):
    return {0: name, 1: addr, 2: inc, 3: state, 4: meta or {}, 5: frm}


def sender(name="alpha", addr="tcp://10.0.0.1:7946"):
    return {0: name, 1: addr}


def ping(seq=1, target="beta", gossip=(), **kw):
    d = sender(**kw)
    d.update({2: list(gossip), 3: seq, 4: target})
    return d


def ping_req(seq=1, target="gamma", taddr="tcp://10.0.0.3:7946", want_nack=True, gossip=()):
    d = sender()
    d.update({2: list(gossip), 3: seq, 4: target, 5: taddr, 6: want_nack})
    return d


def ack(seq=1, target="beta", gossip=()):
    d = sender("beta", "tcp://10.0.0.2:7946")
    d.update({2: list(gossip), 3: seq, 4: target})
    return d


def nack(seq=1, gossip=()):
    d = sender("beta", "tcp://10.0.0.2:7946")
    d.update({2: list(gossip), 3: seq})
    return d


def sync(members=(), join=False, reply=False):
    d = sender()
    d.update({3: join, 4: reply, 5: list(members)})
    return d


def ctl_req(id=1, cmd="members", args=()):
    return {3: id, 4: cmd, 5: list(args)}


def ctl_rep(id=1, status=0, more=False, body=b"[]"):
    return {3: id, 4: status, 5: more, 6: body}


def seg(b):
    return b.hex() if b else "-"


# Each file: list of (kind, name, error or None, header, body[, reencoded]).
FILES = {}


def add(fname, kind, name, err, header, body, re=None):
    FILES.setdefault(fname, []).append((kind, name, err, header, body, re))


def valid(f, name, t, d):
    add(f, "valid", name, None, hdr(t), enc(d))


def invalid(f, name, err, t, body, header=None):
    add(f, "invalid", name, err, header if header is not None else hdr(t),
        body if isinstance(body, (bytes, str)) and not isinstance(body, dict) else enc(body))


def compat(f, name, t, body, re):
    add(f, "compat", name, None, hdr(t), enc(body), enc(re))


G1 = member("gamma", "tcp://10.0.0.3:7946", 7, 1, {}, "alpha")
G2 = member("delta", "tcp://[::1]:7946", 2**40, 2, {"gpus": "2", "ver": "0.1.0"}, "beta")
G3 = member("épsilon", "tcp://host.example:1", 0, 3)
META_FULL = {"k%02d" % i: "v" * 7 for i in range(16)}
# Exactly SL_META_MAX_LEN (512) octets encoded: 4 x (4 + 2 + 120) + 1 + 7.
META_512 = {"k%02d" % i: "v" * 120 for i in range(4)}
META_512["k04"] = "v" * 2
META_513 = dict(META_512, k04="v" * 3)


def gen_envelope():
    f = "envelope"
    p = enc(ping())
    invalid(f, "empty-header", "SL_ETRUNC", PING, p, header=b"")
    invalid(f, "short-header", "SL_ETRUNC", PING, p, header=b"SL\x01")
    invalid(f, "long-header", "SL_EPROTO", PING, p, header=b"SL\x01\x01\x00")
    invalid(f, "bad-magic", "SL_EPROTO", PING, p, header=b"SX\x01\x01")
    invalid(f, "version-0", "SL_EVERSION", PING, p, header=hdr(PING, version=0))
    invalid(f, "version-2", "SL_EVERSION", PING, p, header=hdr(PING, version=2))
    invalid(f, "type-0", "SL_ETYPE", 0, p)
    invalid(f, "type-6", "SL_ETYPE", 6, p)
    invalid(f, "type-16-reserved", "SL_ETYPE", 16, p)
    invalid(f, "type-255", "SL_ETYPE", 255, p)
    # A wrong version wins over an unknown type: version is checked first.
    invalid(f, "version-before-type", "SL_EVERSION", 200, p, header=hdr(200, version=9))
    invalid(f, "empty-body", "SL_ETRUNC", PING, b"")
    invalid(f, "body-not-map", "SL_EPROTO", PING, Raw(b"\x93\x01\x02\x03"))
    invalid(f, "body-reserved-c1", "SL_EPROTO", PING, Raw(b"\xc1"))
    invalid(f, "body-ext", "SL_EPROTO", PING, Raw(b"\xd4\x01\x00"))
    invalid(f, "body-map16-small", "SL_ENONCANON", PING,
            Raw(b"\xde\x00\x05" + enc(ping())[1:]))
    invalid(f, "body-too-many-keys", "SL_ETOOBIG", PING,
            Raw(b"\xde\x00\x21" + b"\x00" * 66))
    invalid(f, "body-map-count-exceeds-bytes", "SL_ETRUNC", PING, Raw(b"\x8f\x00\xa1a"))
    # Over SL_MSG_MAX_LEN (4 MiB): rejected before any parsing.
    add(f, "invalid", "body-oversized", "SL_ETOOBIG", hdr(PING), "80+00*4194304", None)
    invalid(f, "trailing-byte", "SL_EPROTO", PING, p + b"\x00")
    invalid(f, "two-maps", "SL_EPROTO", PING, p + p)
    # Types (section 2.1): this codec (membership and control) refuses every
    # type it does not implement; 16..63 reach it only when no protocol
    # took them (store.txt, blob.txt have their own).
    invalid(f, "type-15-reserved", "SL_ETYPE", 15, p)
    invalid(f, "type-24-blob", "SL_ETYPE", 24, p)
    invalid(f, "type-66-reserved", "SL_ETYPE", 66, p)
    # No floats in any message (section 3, rule 5): float32, float64 and
    # the canonical NaN alike are SL_EPROTO, in every protocol.
    f64 = lambda x: Raw(b"\xcb" + struct.pack(">d", x))
    invalid(f, "float32-unknown-key", "SL_EPROTO", PING,
            {**ping(), 9: Raw(b"\xca" + struct.pack(">f", 1.0))})
    invalid(f, "float-nan-unknown-key", "SL_EPROTO", PING,
            {**ping(), 9: Raw(b"\xcb\x7f\xf8" + b"\x00" * 6)})
    invalid(f, "float-as-seq", "SL_EPROTO", PING, {**ping(), 3: f64(1.0)})
    invalid(f, "ctl-req-float-unknown-key", "SL_EPROTO", CTL_REQ, {**ctl_req(), 9: f64(0.5)})
    invalid(f, "ctl-rep-float-unknown-key", "SL_EPROTO", CTL_REP, {**ctl_rep(), 9: [f64(0.5)]})


def gen_ping():
    f = "ping"
    valid(f, "minimal", PING, ping(seq=0, target="b", name="a", addr="x"))
    valid(f, "one-gossip", PING, ping(seq=200, gossip=[G1]))
    valid(f, "three-gossip-meta", PING, ping(seq=0xFFFFFFFF, gossip=[G1, G2, G3]))
    valid(f, "max-gossip", PING,
          ping(seq=70000, gossip=[member("m%02d" % i, "tcp://h:%d" % i, i) for i in range(32)]))
    valid(f, "name-64", PING, ping(seq=1, target="t" * 64, name="n" * 64, addr="a" * 128))
    valid(f, "meta-full", PING, ping(gossip=[member("m", "tcp://h:1", 1, 0, META_FULL)]))
    valid(f, "meta-512-bytes", PING, ping(gossip=[member("m", "tcp://h:1", 1, 0, META_512)]))
    assert len(enc(META_512)) == 512
    compat(f, "unknown-key-skipped", PING, {**ping(seq=5), 9: {1: [1, 2], 2: "x"}}, ping(seq=5))
    compat(f, "unknown-member-key-skipped", PING,
           ping(gossip=[{**G1, 7: 42}]), ping(gossip=[G1]))
    p = enc(ping(seq=5))
    invalid(f, "truncated-last-byte", "SL_ETRUNC", PING, Raw(p[:-1]))
    invalid(f, "truncated-in-head", "SL_ETRUNC", PING, Raw(p[:3]))
    invalid(f, "seq-uint8-small", "SL_ENONCANON", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, Raw(b"\xcc\x05")), (4, "b")]))
    invalid(f, "seq-uint32-small", "SL_ENONCANON", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, Raw(b"\xce\x00\x00\x01\x00")), (4, "b")]))
    invalid(f, "seq-negative", "SL_EPROTO", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, -1), (4, "b")]))
    invalid(f, "seq-over-u32", "SL_EPROTO", PING, ping(seq=1 << 32))
    invalid(f, "seq-str", "SL_EPROTO", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, "1"), (4, "b")]))
    invalid(f, "key-uint8-small", "SL_ENONCANON", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (Raw(b"\xcc\x03"), 1), (4, "b")]))
    invalid(f, "name-str8-small", "SL_ENONCANON", PING,
            pairs([(0, Raw(b"\xd9\x05alpha")), (1, "x"), (2, []), (3, 1), (4, "b")]))
    invalid(f, "duplicate-key", "SL_EPROTO", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, 1), (3, 1), (4, "b")]))
    invalid(f, "keys-out-of-order", "SL_ENONCANON", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (4, "b"), (3, 1)]))
    invalid(f, "missing-target", "SL_EPROTO", PING,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, 1)]))
    invalid(f, "missing-gossip", "SL_EPROTO", PING,
            pairs([(0, "alpha"), (1, "x"), (3, 1), (4, "b")]))
    invalid(f, "name-65", "SL_ETOOBIG", PING, ping(name="n" * 65))
    invalid(f, "addr-129", "SL_ETOOBIG", PING, ping(addr="a" * 129))
    invalid(f, "target-empty", "SL_EPROTO", PING, ping(target=""))
    invalid(f, "name-bad-utf8", "SL_EPROTO", PING, ping(name=Raw(b"\xa2\xc3\x28")))
    invalid(f, "name-overlong-utf8", "SL_EPROTO", PING, ping(name=Raw(b"\xa2\xc0\xaf")))
    invalid(f, "name-control-char", "SL_EPROTO", PING, ping(name="a\nb"))
    invalid(f, "name-is-bin", "SL_EPROTO", PING, ping(name=b"alpha"))
    invalid(f, "too-many-gossip", "SL_ETOOBIG", PING,
            ping(gossip=[member("m%02d" % i, "tcp://h:1") for i in range(33)]))
    invalid(f, "gossip-state-4", "SL_EPROTO", PING, ping(gossip=[member("m", "a", 1, 4)]))
    invalid(f, "gossip-missing-from", "SL_EPROTO", PING,
            ping(gossip=[{0: "m", 1: "a", 2: 1, 3: 0, 4: {}}]))
    invalid(f, "gossip-incarnation-negative", "SL_EPROTO", PING,
            ping(gossip=[{**member("m", "a"), 2: -5}]))
    invalid(f, "meta-keys-out-of-order", "SL_ENONCANON", PING,
            ping(gossip=[member("m", "a", 1, 0, pairs([("b", "1"), ("a", "2")]))]))
    invalid(f, "meta-prefix-after-longer", "SL_ENONCANON", PING,
            ping(gossip=[member("m", "a", 1, 0, pairs([("ab", "1"), ("a", "2")]))]))
    invalid(f, "meta-duplicate-key", "SL_EPROTO", PING,
            ping(gossip=[member("m", "a", 1, 0, pairs([("a", "1"), ("a", "2")]))]))
    invalid(f, "meta-int-value", "SL_EPROTO", PING,
            ping(gossip=[member("m", "a", 1, 0, {"gpus": 2})]))
    invalid(f, "meta-int-key", "SL_EPROTO", PING,
            ping(gossip=[member("m", "a", 1, 0, {1: "x"})]))
    invalid(f, "meta-empty-key", "SL_EPROTO", PING,
            ping(gossip=[member("m", "a", 1, 0, {"": "x"})]))
    invalid(f, "meta-key-33", "SL_ETOOBIG", PING,
            ping(gossip=[member("m", "a", 1, 0, {"k" * 33: "x"})]))
    invalid(f, "meta-value-129", "SL_ETOOBIG", PING,
            ping(gossip=[member("m", "a", 1, 0, {"k": "v" * 129})]))
    invalid(f, "meta-17-entries", "SL_ETOOBIG", PING,
            ping(gossip=[member("m", "a", 1, 0, {"k%02d" % i: "" for i in range(17)})]))
    invalid(f, "meta-over-512-bytes", "SL_ETOOBIG", PING,
            ping(gossip=[member("m", "a", 1, 0,
                                {"k%02d" % i: "v" * 40 for i in range(13)})]))
    invalid(f, "meta-513-bytes", "SL_ETOOBIG", PING,
            ping(gossip=[member("m", "a", 1, 0, META_513)]))
    invalid(f, "meta-513-bytes-at-end", "SL_ETOOBIG", SYNC,
            sync([member("m", "a", 1, 0, META_513)]))
    # The 512-octet bound is applied while reading (envelope.md 4): the map
    # is read within its first 512 octets; one the body ends inside sooner
    # is SL_ETRUNC, one that needs more is SL_ETOOBIG even if cut short.
    mp_full = enc(ping(gossip=[member("m", "a", 1, 0, META_FULL)]))
    at = mp_full.index(enc(META_FULL))
    invalid(f, "meta-cut-short", "SL_ETRUNC", PING, Raw(mp_full[:at + 40]))
    mp_513 = enc(ping(gossip=[member("m", "a", 1, 0, META_513)]))
    at = mp_513.index(enc(META_513))
    invalid(f, "meta-513-garbage-after-512", "SL_ETOOBIG", PING, Raw(mp_513[:at + 512] + b"\x00" * 100))
    invalid(f, "meta-not-map", "SL_EPROTO", PING,
            ping(gossip=[member("m", "a", 1, 0, Raw(enc(["x"])))]))
    invalid(f, "unknown-key-float", "SL_EPROTO", PING,
            {**ping(), 9: Raw(b"\xcb" + struct.pack(">d", 1.5))})
    invalid(f, "unknown-key-too-deep", "SL_ETOOBIG", PING, {**ping(), 9: [[[[1]]]]})
    invalid(f, "unknown-key-ext", "SL_EPROTO", PING, {**ping(), 9: Raw(b"\xd5\x01\x00\x00")})
    invalid(f, "trailing-bytes", "SL_EPROTO", PING, Raw(p + b"\xc0\xc0"))


def gen_ping_req():
    f = "ping_req"
    valid(f, "want-nack", PING_REQ, ping_req())
    valid(f, "no-nack", PING_REQ, ping_req(seq=300, want_nack=False))
    valid(f, "gossip", PING_REQ, ping_req(seq=65536, gossip=[G2, G3]))
    invalid(f, "want-nack-int", "SL_EPROTO", PING_REQ,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, 1), (4, "g"), (5, "a"), (6, 1)]))
    invalid(f, "missing-target-addr", "SL_EPROTO", PING_REQ,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, 1), (4, "g"), (6, True)]))
    invalid(f, "target-addr-129", "SL_ETOOBIG", PING_REQ, ping_req(taddr="a" * 129))
    invalid(f, "keys-out-of-order", "SL_ENONCANON", PING_REQ,
            pairs([(0, "alpha"), (1, "x"), (2, []), (3, 1), (5, "a"), (4, "g"), (6, True)]))
    invalid(f, "truncated", "SL_ETRUNC", PING_REQ, Raw(enc(ping_req())[:-1]))
    invalid(f, "wrong-version", "SL_EVERSION", PING_REQ, ping_req(),
            header=hdr(PING_REQ, version=2))


def gen_ack():
    f = "ack"
    valid(f, "plain", ACK, ack())
    valid(f, "relayed", ACK, ack(seq=12345, target="gamma"))
    valid(f, "gossip", ACK, ack(seq=0, gossip=[G1, G2]))
    invalid(f, "seq-uint16-small", "SL_ENONCANON", ACK,
            pairs([(0, "b"), (1, "x"), (2, []), (3, Raw(b"\xcd\x00\xff")), (4, "t")]))
    invalid(f, "duplicate-key", "SL_EPROTO", ACK,
            pairs([(0, "b"), (0, "b"), (1, "x"), (2, []), (3, 1), (4, "t")]))
    invalid(f, "gossip-array16-small", "SL_ENONCANON", ACK,
            pairs([(0, "b"), (1, "x"), (2, Raw(b"\xdc\x00\x00")), (3, 1), (4, "t")]))
    invalid(f, "truncated-in-gossip", "SL_ETRUNC", ACK, Raw(enc(ack(gossip=[G1]))[:30]))
    invalid(f, "gossip-count-exceeds-bytes", "SL_ETRUNC", ACK,
            pairs([(0, "b"), (1, "x"), (2, Raw(b"\x9f"))]))


def gen_nack():
    f = "nack"
    valid(f, "plain", NACK, nack())
    valid(f, "seq-max", NACK, nack(seq=0xFFFFFFFF))
    valid(f, "gossip", NACK, nack(seq=9, gossip=[G3]))
    invalid(f, "has-no-seq", "SL_EPROTO", NACK, pairs([(0, "b"), (1, "x"), (2, [])]))
    invalid(f, "seq-uint64-small", "SL_ENONCANON", NACK,
            pairs([(0, "b"), (1, "x"), (2, []), (3, Raw(b"\xcf" + struct.pack(">Q", 9)))]))
    invalid(f, "seq-int8", "SL_ENONCANON", NACK,
            pairs([(0, "b"), (1, "x"), (2, []), (3, Raw(b"\xd0\x05"))]))
    invalid(f, "seq-bool", "SL_EPROTO", NACK, pairs([(0, "b"), (1, "x"), (2, []), (3, True)]))
    invalid(f, "trailing-bytes", "SL_EPROTO", NACK, Raw(enc(nack()) + b"\x01"))


def gen_sync():
    f = "sync"
    valid(f, "empty-join", SYNC, sync(join=True))
    valid(f, "reply-three", SYNC, sync([G1, G2, G3], reply=True))
    valid(f, "push-forty", SYNC,
          sync([member("node-%03d" % i, "tcp://10.1.0.%d:7946" % i, i * 1000, i % 4,
                       {"gpus": str(i % 3)} if i % 2 else {}) for i in range(40)]))
    # The largest SYNC: 16,384 records (the codec does not check names are
    # distinct; membership.md, receiver rules). Written with a repeat.
    rec = enc(member("m", "tcp://h:1"))
    head = enc(sync())[:-1] + b"\xdc\x40\x00"
    add(f, "valid", "members-16384", None, hdr(SYNC), "%s+%s*16384" % (head.hex(), rec.hex()))
    invalid(f, "members-16385", "SL_ETOOBIG", SYNC,
            pairs([(0, "a"), (1, "x"), (3, False), (4, False),
                   (5, Raw(b"\xdc" + struct.pack(">H", 16385)))]))
    invalid(f, "members-array32-small", "SL_ENONCANON", SYNC,
            pairs([(0, "a"), (1, "x"), (3, False), (4, False),
                   (5, Raw(b"\xdd" + struct.pack(">I", 2)))]))
    invalid(f, "members-count-exceeds-bytes", "SL_ETRUNC", SYNC,
            pairs([(0, "a"), (1, "x"), (3, False), (4, False),
                   (5, Raw(b"\xdc\x01\x00" + b"\x00" * 300))]))
    invalid(f, "member-name-65", "SL_ETOOBIG", SYNC, sync([member("n" * 65, "a")]))
    invalid(f, "member-bad-meta", "SL_ENONCANON", SYNC,
            sync([G1, member("m", "a", 1, 0, pairs([("z", ""), ("y", "")]))]))
    invalid(f, "join-int", "SL_EPROTO", SYNC,
            pairs([(0, "a"), (1, "x"), (3, 0), (4, False), (5, [])]))
    invalid(f, "truncated-member", "SL_ETRUNC", SYNC, Raw(enc(sync([G1, G2]))[:-3]))
    invalid(f, "member-missing-state", "SL_EPROTO", SYNC,
            sync([{0: "m", 1: "a", 2: 1, 4: {}, 5: ""}, G1]))
    invalid(f, "member-keys-out-of-order", "SL_ENONCANON", SYNC,
            sync([pairs([(0, "m"), (1, "a"), (3, 0), (2, 1), (4, {}), (5, "")])] * 2))


def gen_ctl_req():
    f = "ctl_req"
    valid(f, "members", CTL_REQ, ctl_req())
    valid(f, "stats", CTL_REQ, ctl_req(id=4000000000, cmd="stats"))
    valid(f, "args", CTL_REQ, ctl_req(id=7, cmd="put", args=[b"key", b"\x00\x01\xff", b""]))
    valid(f, "args-16", CTL_REQ, ctl_req(id=8, cmd="x" * 32, args=[b"a"] * 16))
    valid(f, "arg-300", CTL_REQ, ctl_req(id=9, cmd="put", args=[b"z" * 300]))
    compat(f, "sender-keys-ignored", CTL_REQ, {**ctl_req(), 0: "a", 1: "b"}, ctl_req())
    invalid(f, "cmd-33", "SL_ETOOBIG", CTL_REQ, ctl_req(cmd="c" * 33))
    invalid(f, "cmd-empty", "SL_EPROTO", CTL_REQ, ctl_req(cmd=""))
    invalid(f, "args-17", "SL_ETOOBIG", CTL_REQ, ctl_req(args=[b""] * 17))
    invalid(f, "arg-is-str", "SL_EPROTO", CTL_REQ, ctl_req(args=["key"]))
    invalid(f, "arg-bin16-small", "SL_ENONCANON", CTL_REQ,
            ctl_req(args=[Raw(b"\xc5\x00\x01z")]))
    invalid(f, "arg-over-1mib", "SL_ETOOBIG", CTL_REQ,
            ctl_req(args=[Raw(b"\xc6" + struct.pack(">I", (1 << 20) + 1))]))
    invalid(f, "missing-args", "SL_EPROTO", CTL_REQ, {3: 1, 4: "members"})
    invalid(f, "id-over-u32", "SL_EPROTO", CTL_REQ, ctl_req(id=1 << 32))
    invalid(f, "truncated", "SL_ETRUNC", CTL_REQ, Raw(enc(ctl_req())[:-2]))
    # one request per command of control.md section 4, as a client sends it
    manifest = enc({0: b"\x11" * 32, 1: 5, 2: 1 << 20, 3: [b"\x22" * 32]})
    h = "ab" * 32
    study = b'{"name":"s","trainer":{"type":"command","command":"python3 t.py {lr}"},' \
        b'"search_space":{"lr":{"type":"real","low":0.001,"high":0.1}}}'
    for i, (cmd, args) in enumerate([
            ("hello", []),
            ("put", [b"greeting", b"hello"]), ("get", [b"greeting"]), ("del", [b"greeting"]),
            ("keys", []), ("keys", [b"study/"]), ("watch-keys", [b"jobs/"]),
            ("store-fault", [b"block", b"tcp://127.0.0.1:7601"]), ("store-fault", [b"heal"]),
            ("blob-chunk", [b"\x00\x01chunk"]), ("blob-commit", [manifest]),
            ("blob-fetch", [h.encode()]), ("blob-read", [h.encode(), b"0"]), ("blob-ls", []),
            ("submit", [study]), ("status", [b"9af1f604fc8d3934"]), ("results", [b"grid-mlp"]),
            ("plot", [b"9af1f604fc8d3934"]), ("logs", [b"9af1f604fc8d3934", b"e4a326e17e70d672"]),
            ("fetch", [b"9af1f604fc8d3934", b"e4a3"]), ("cancel", [b"9af1f604fc8d3934"])]):
        valid(f, "cmd-%s-%d" % (cmd, len(args)), CTL_REQ, ctl_req(id=100 + i, cmd=cmd, args=args))
    # the same commands for an elastic job (control.md section 4.7)
    job = b'{"kind":"elastic","name":"mlp-dp","nodes":{"min":1,"max":2},' \
        b'"trainer":{"type":"builtin","model":"mlp:32"},' \
        b'"dataset":{"name":"fashion-mnist","limit":3000},"epochs":1,"global_batch":64}'
    j = b"accd221ee4d9666f"
    for i, (name, cmd, args) in enumerate([
            ("job-submit", "submit", [job]), ("job-status", "status", [j]),
            ("job-status-by-name", "status", [b"mlp-dp"]), ("job-results", "results", [j]),
            ("job-plot", "plot", [j]), ("job-logs", "logs", [j]),
            ("job-logs-peer", "logs", [j, b"a"]), ("job-fetch", "fetch", [j]),
            ("job-cancel", "cancel", [j])]):
        valid(f, name, CTL_REQ, ctl_req(id=200 + i, cmd=cmd, args=args))


def gen_ctl_rep():
    f = "ctl_rep"
    valid(f, "members-json", CTL_REP,
          ctl_rep(body=b'[{"name":"alpha","addr":"tcp://10.0.0.1:7946","state":"alive"}]'))
    valid(f, "error", CTL_REP, ctl_rep(id=2, status=10, body=b""))
    valid(f, "stream-part", CTL_REP, ctl_rep(id=3, more=True, body=bytes(range(256)) * 2))
    invalid(f, "body-is-str", "SL_EPROTO", CTL_REP, ctl_rep(body=Raw(enc("[]"))))
    invalid(f, "more-int", "SL_EPROTO", CTL_REP, {3: 1, 4: 0, 5: 1, 6: b""})
    invalid(f, "status-negative", "SL_EPROTO", CTL_REP, {3: 1, 4: -1, 5: False, 6: b""})
    invalid(f, "body-bin32-small", "SL_ENONCANON", CTL_REP,
            ctl_rep(body=Raw(b"\xc6\x00\x00\x00\x02[]")))
    invalid(f, "body-over-limit", "SL_ETOOBIG", CTL_REP,
            ctl_rep(body=Raw(b"\xc6" + struct.pack(">I", (4 << 20) - 63))))
    invalid(f, "keys-out-of-order", "SL_ENONCANON", CTL_REP,
            pairs([(3, 1), (5, False), (4, 0), (6, b"")]))
    invalid(f, "truncated-body", "SL_ETRUNC", CTL_REP, Raw(enc(ctl_rep())[:-1]))
    # replies of every command (control.md section 4), as peers send them
    for i, (name, status, more, body) in enumerate([
            ("members", 0, False, b'[{"name":"a","addr":"tcp://127.0.0.1:23411","state":"alive",'
             b'"incarnation":1,"meta":{"version":"0.1.0"},"self":true,"state_age_ms":0}]'),
            ("stats", 0, False, b'{"name":"a","addr":"tcp://127.0.0.1:23411","version":"0.1.0",'
             b'"uptime_ms":1042,"members":{"total":1,"alive":1},"decode":{"ok":1,"bad":2,'
             b'"errors":{"SL_ENONCANON":2}},"store":{"state_hash":18446744073709551615}}'),
            ("hello", 0, False, b'{"protocol":1,"version":"0.1.0","name":"a","commands":'
             b'["members","stats","hello","put","get","del","keys","store-fault","watch-keys"]}'),
            ("put", 0, False, b"{}"), ("get-raw", 0, False, b"\x00\xffhello"),
            ("get-notfound", 10, False, b"no such key"),
            ("get-usage", 1, False, b"usage: get KEY"),
            ("put-toobig", 4, False, b"value over 64 KiB: store it as a blob"),
            ("put-disk", 9, False, b"cannot append the write to the log"),
            ("keys", 0, False, b'["peer/a/slots","py/k1"]'),
            ("keys-part", 0, True, b'["a","b",'), ("keys-last", 0, False, b'"c"]'),
            ("watch-open", 0, True, b""),
            ("watch-changes", 0, True, b'{"key":"a","type":"register","value":"1",'
             b'"encoding":"utf-8"}\n{"key":"a","deleted":true}\n'),
            ("watch-behind", 12, False, b"watch fell too far behind (over 8 MiB of changes not "
             b"read); start it again"),
            ("watch-busy", 18, False, b"this peer already serves 64 watches"),
            ("store-fault-off", 15, False, b"store-fault is a test-only command"),
            ("blob-chunk", 0, False, b"ab" * 32),
            ("blob-commit", 0, False, b'{"hash":"' + b"ab" * 32 + b'","state":"done"}'),
            ("blob-commit-missing", 10, False, b"a chunk of this blob is not here"),
            ("blob-fetch", 0, False, b'{"hash":"' + b"ab" * 32 + b'","state":"fetching",'
             b'"size":2500000,"chunks":3,"chunk_len":1048576,"held":1}'),
            ("blob-read", 0, False, bytes(range(256))),
            ("blob-read-range", 20, False, b"chunk index out of range"),
            ("blob-ls", 0, False, b'[{"hash":"' + b"ab" * 32 + b'","size":5,"chunks":1,'
             b'"holders":["a"],"alive_holders":["a"]}]'),
            ("submit", 0, False, b'{"study":"9af1f604fc8d3934","name":"s","new":true}'),
            ("submit-open", 15, False, b"study refused: command trainers are off in an open "
             b"cluster"),
            ("status", 0, False, b'{"study":"9af1f604fc8d3934","name":"s","budget":3,'
             b'"max_epochs":3,"objective":"score","finished":null,"cancelled":false,"trials":'
             b'[{"trial":"e4a326e17e70d672","ordinal":0,"config":{"lr":0.1},"owner":"b",'
             b'"claim_epoch":1,"state":"running","epoch":1,"rung":0,"target":3,"failures":0,'
             b'"checkpoint":1,"metrics":{"epoch":1,"score":0.1}}]}'),
            ("status-notfound", 10, False, b"no study 'x' on this peer"),
            ("results", 0, False, b'{"study":"9af1f604fc8d3934","leaderboard":"...",'
             b'"models":[],"pareto":null}'),
            ("plot", 0, False, b'{"curves.svg":"<svg/>"}'),
            ("logs", 0, False, b'[a] claim epoch 1\n{"epoch":1,"score":0.1}'),
            ("fetch", 0, False, b"PK\x03\x04" + bytes(60)),
            ("fetch-none", 10, False, b"trial e4a326e17e70d672 has no replicated checkpoint yet"),
            ("cancel", 0, False, b'{"study":"9af1f604fc8d3934","cancelled":true}'),
            ("unknown", 16, False, b"unknown command 'frobnicate'"),
            ("bad-args", 1, False, b"usage: members")]):
        valid(f, "rep-" + name, CTL_REP, ctl_rep(id=100 + i, status=status, more=more, body=body))
    # replies for an elastic job (control.md section 4.7), as peers send them
    j = b"accd221ee4d9666f"
    status = (b'{"kind":"elastic","job":"' + j + b'","name":"mlp-dp","state":"running",'
              b'"trainer":"builtin","nodes":{"min":1,"max":2},"step":20,"epoch":1,"epochs":1,'
              b'"round":2,"world":["a","b"],"metrics":{"train_loss":1.2129,"epochs":[]},'
              b'"rounds":[{"round":1,"world":["a"],"leader":"a","start_step":0,'
              b'"started_ms":1795711586677},{"round":2,"world":["a","b"],"leader":"b",'
              b'"start_step":12,"started_ms":1795711587120}]}')
    done = (b'{"kind":"elastic","job":"' + j + b'","name":"mlp-dp","state":"done",'
            b'"trainer":"builtin","nodes":{"min":1,"max":2},"step":43,"epoch":1,"epochs":1,'
            b'"round":2,"world":["a","b"],"metrics":{"train_loss":0.9513,"epochs":[{"epoch":1,'
            b'"step":43,"train_loss":1.2129,"val_loss":0.7352,"val_acc":0.74,"test_loss":0.7521,'
            b'"test_acc":0.7312,"world":2,"wall_ms":1795711587599}]},"rounds":[{"round":1,'
            b'"world":["a"],"leader":"a","start_step":0,"started_ms":1795711586677},'
            b'{"round":2,"world":["a","b"],"leader":"b","start_step":12,'
            b'"started_ms":1795711587120}],"checkpoint_step":43,"model":"' + b"cd" * 32 + b'"}')
    for i, (name, status_code, more, body) in enumerate([
            ("job-submit", 0, False, b'{"kind":"elastic","job":"' + j + b'","name":"mlp-dp"}'),
            ("job-refused", 1, False, b"job refused: nodes.max: must be >= nodes.min (2), not 1"),
            ("job-open", 15, False, b"job refused: a command job runs a command on every peer, "
             b"and this cluster is open (no --key); start the peers with --key, or with "
             b"--allow-commands on a trusted network"),
            ("job-status", 0, False, status),
            ("job-status-done", 0, False, done),
            ("job-status-waiting", 0, False, b'{"kind":"elastic","job":"' + j + b'","name":'
             b'"mlp-dp","state":"waiting","trainer":"command","nodes":{"min":2,"max":2},"step":0,'
             b'"epoch":0,"epochs":3,"round":0,"world":[],"metrics":{"epochs":[]},"rounds":[]}'),
            ("job-status-failed", 0, False, b'{"kind":"elastic","job":"' + j + b'","name":'
             b'"mlp-dp","state":"failed","trainer":"builtin","nodes":{"min":1,"max":1},"step":0,'
             b'"epoch":0,"epochs":1,"round":1,"world":["b"],"metrics":{"epochs":[]},"rounds":'
             b'[{"round":1,"world":["b"],"leader":"b","start_step":0,"started_ms":1795711585990}],'
             b'"failures":[{"why":"data set \'x\': no such data set, directory or file",'
             b'"wall_ms":1795711586000,"peer":"b"}]}'),
            ("job-results", 0, False, done[:-1] + b',"curve":[[1,2.2981,1,1795711586710],'
             b'[12,null,2,1795711587120]],"done":{"step":43,"round":2,"wall_ms":1795711587619,'
             b'"model":"' + b"cd" * 32 + b'"}}'),
            ("job-plot", 0, False, b'{"loss.svg":"<svg/>","world.svg":"<svg/>"}'),
            ("job-logs", 0, False, b"==> a <==\n16:46:26.675 following job " + j +
             b" (mlp-dp): 1 to 2 peers, built-in trainer\n==> b <==\n"),
            ("job-fetch-part", 0, True, b"PK\x03\x04" + bytes(60)),
            ("job-fetch-last", 0, False, b"\x00" * 22),
            ("job-fetch-not-done", 10, False, b"job " + j + b" has no final model yet (it is not "
             b"done)"),
            ("job-cancel", 0, False, b'{"job":"' + j + b'","cancelled":true}'),
            ("job-usage", 1, False, b"usage: logs JOB [PEER]")]):
        valid(f, "rep-" + name, CTL_REP, ctl_rep(id=200 + i, status=status_code, more=more,
                                                 body=body))


HEADER = """\
# Starling wire test vectors: {name}. Generated by proto/vectors/gen.py;
# format in proto/vectors/README.md. Do not edit by hand: edit gen.py.
#   valid   NAME HEADER BODY           decodes; re-encodes to BODY exactly
#   compat  NAME HEADER BODY REBODY    decodes; re-encodes to REBODY
#   invalid NAME ERROR HEADER BODY     rejected with exactly ERROR
"""


def main():
    for g in (gen_envelope, gen_ping, gen_ping_req, gen_ack, gen_nack, gen_sync, gen_ctl_req,
              gen_ctl_rep):
        g()
    for fname, rows in FILES.items():
        with open(os.path.join(HERE, fname + ".txt"), "w") as out:
            out.write(HEADER.format(name=fname))
            for kind, name, err, header, body, re in rows:
                b = body if isinstance(body, str) else seg(body)
                if kind == "valid":
                    out.write("valid %s %s %s\n" % (name, seg(header), b))
                elif kind == "compat":
                    out.write("compat %s %s %s %s\n" % (name, seg(header), b, seg(re)))
                else:
                    out.write("invalid %s %s %s %s\n" % (name, err, seg(header), b))


def write_corpus():
    """Seeds for tests/fuzz (input layout in tests/fuzz/fuzz_msg.c): every
    vector but the 4 MiB one, plus metadata maps for sl_meta_validate."""
    d = os.path.join(HERE, "..", "..", "tests", "fuzz", "corpus", "msg")
    if not os.path.isdir(d):
        return
    for f in os.listdir(d):
        if f.startswith("v-"):
            os.remove(os.path.join(d, f))
    for fname, rows in FILES.items():
        for kind, name, err, header, body, re in rows:
            if isinstance(body, str) or len(header) > 7:
                continue
            with open(os.path.join(d, "v-%s-%s" % (fname, name)), "wb") as out:
                out.write(bytes([len(header)]) + header + body)
    for i, meta in enumerate([{}, {"gpus": "2", "ver": "0.1.0"}, META_FULL]):
        with open(os.path.join(d, "v-meta-%d" % i), "wb") as out:
            out.write(b"\xc0" + enc(meta))
    # Generic msgpack (flag 0x40: typed reads vs skip vs writer).
    f64 = lambda x: Raw(b"\xcb" + struct.pack(">d", x))
    values = [
        [0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1],
        [-1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)],
        [f64(1.5), f64(-0.0), f64(float("inf")), Raw(b"\xcb\x7f\xf8" + b"\x00" * 6)],
        {"a": None, "ab": True, "b": False, "c": b"\x00\xff", "d": "é" * 20},
        {0: [[[[[1]]]]], 1: {2: {"x": [3]}}, 7: "x" * 40, 300: b"y" * 300},
    ]
    for i, v in enumerate(values):
        with open(os.path.join(d, "v-mpack-%d" % i), "wb") as out:
            out.write(b"\x40" + enc(v))
    for fname, rows in FILES.items():
        for kind, name, err, header, body, re in rows:
            if kind == "valid" and not isinstance(body, str) and len(header) == 4:
                with open(os.path.join(d, "v-mpack-%s-%s" % (fname, name)), "wb") as out:
                    out.write(b"\x44" + header + body)


if __name__ == "__main__":
    main()
    write_corpus()
