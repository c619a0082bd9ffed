"""The control protocol's two messages on the wire (proto/envelope.md and
proto/control.md, sections 2-3): a 4-octet header frame and a canonical
msgpack body frame. Written from the spec alone; the decoder is strict, so
it also checks a peer's replies against the spec, and the tests run it over
the hex vectors in proto/vectors/ctl_*.txt.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, List, Tuple

from .errors import Status

MAGIC = b"SL"
VERSION = 1
CTL_REQ = 64
CTL_REP = 65
MSG_MAX = 4 * 1024 * 1024          # a body frame, envelope.md 2.2
ARG_MAX = 1024 * 1024              # one CTL_REQ argument
ARGS_MAX = 16                      # CTL_REQ arguments
CMD_MAX = 32                       # command name octets
REP_BODY_MAX = MSG_MAX - 64        # a CTL_REP body
DEPTH_MAX = 8                      # nesting of an unknown key's value


class WireError(Exception):
    """A message the spec says a receiver rejects; ``status`` is the
    ``Status`` it names (ETRUNC, ETOOBIG, EPROTO, ENONCANON, ...)."""

    def __init__(self, status: Status, why: str) -> None:
        self.status = status
        super().__init__(f"SL_{status.name}: {why}")


@dataclass
class CtlReq:
    """CTL_REQ (type 64): ``id``, ``cmd`` and ``args`` (byte strings)."""

    id: int
    cmd: str
    args: List[bytes] = field(default_factory=list)


@dataclass
class CtlRep:
    """CTL_REP (type 65): ``id``, ``status``, ``more`` and ``body``."""

    id: int
    status: int
    more: bool
    body: bytes


# ---- encoding (canonical: the smallest forms, keys ascending) ----

def _uint(v: int) -> bytes:
    if v < 0x80:
        return bytes([v])
    if v < 0x100:
        return b"\xcc" + struct.pack(">B", v)
    if v < 0x10000:
        return b"\xcd" + struct.pack(">H", v)
    if v < 0x100000000:
        return b"\xce" + struct.pack(">I", v)
    return b"\xcf" + struct.pack(">Q", v)


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    n = len(b)
    if n < 32:
        return bytes([0xA0 | n]) + b
    if n < 0x100:
        return b"\xd9" + struct.pack(">B", n) + b
    if n < 0x10000:
        return b"\xda" + struct.pack(">H", n) + b
    return b"\xdb" + struct.pack(">I", n) + b


def _bin(b: bytes) -> bytes:
    n = len(b)
    if n < 0x100:
        return b"\xc4" + struct.pack(">B", n) + b
    if n < 0x10000:
        return b"\xc5" + struct.pack(">H", n) + b
    return b"\xc6" + struct.pack(">I", n) + b


def _array_head(n: int) -> bytes:
    if n < 16:
        return bytes([0x90 | n])
    if n < 0x10000:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def header(msg_type: int) -> bytes:
    """The header frame: ``SL``, version 1, the type."""
    return MAGIC + bytes([VERSION, msg_type])


def encode_req(req: CtlReq) -> Tuple[bytes, bytes]:
    """(header, body) of a CTL_REQ; raises ValueError on a field out of its limits."""
    cmd = req.cmd.encode("utf-8")
    if not 0 <= req.id < 1 << 32:
        raise ValueError("request id out of 0..2^32-1")
    if not 1 <= len(cmd) <= CMD_MAX or any(c < 0x20 or c == 0x7F for c in cmd):
        raise ValueError(f"command name must be 1..{CMD_MAX} octets without control characters")
    if len(req.args) > ARGS_MAX:
        raise ValueError(f"at most {ARGS_MAX} arguments")
    for a in req.args:
        if len(a) > ARG_MAX:
            raise ValueError(f"an argument is {len(a)} bytes, over {ARG_MAX}")
    body = (b"\x83" + b"\x03" + _uint(req.id) + b"\x04" + _str(req.cmd) + b"\x05"
            + _array_head(len(req.args)) + b"".join(_bin(bytes(a)) for a in req.args))
    return header(CTL_REQ), body


def encode_rep(rep: CtlRep) -> Tuple[bytes, bytes]:
    """(header, body) of a CTL_REP (what a peer sends; used by the tests)."""
    body = (b"\x84\x03" + _uint(rep.id) + b"\x04" + _uint(rep.status) + b"\x05"
            + (b"\xc3" if rep.more else b"\xc2") + b"\x06" + _bin(rep.body))
    return header(CTL_REP), body


# ---- decoding (strict: envelope.md section 3) ----

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.d = memoryview(data)
        self.p = 0

    def take(self, n: int) -> bytes:
        if self.p + n > len(self.d):
            raise WireError(Status.ETRUNC, "input ends early")
        b = bytes(self.d[self.p:self.p + n])
        self.p += n
        return b

    def byte(self) -> int:
        return self.take(1)[0]

    def be(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big")

    def peek(self) -> int:
        if self.p >= len(self.d):
            raise WireError(Status.ETRUNC, "input ends early")
        return self.d[self.p]


def _canon(ok: bool, what: str) -> None:
    if not ok:
        raise WireError(Status.ENONCANON, f"{what} not in its smallest form")


def _read_uint(r: _Reader, hi: int) -> int:
    b = r.byte()
    if b < 0x80:
        v = b
    elif b == 0xCC:
        v = r.be(1)
        _canon(v >= 0x80, "uint8")
    elif b == 0xCD:
        v = r.be(2)
        _canon(v >= 0x100, "uint16")
    elif b == 0xCE:
        v = r.be(4)
        _canon(v >= 0x10000, "uint32")
    elif b == 0xCF:
        v = r.be(8)
        _canon(v >= 0x100000000, "uint64")
    else:
        raise WireError(Status.EPROTO, "expected an unsigned integer")
    if v > hi:
        raise WireError(Status.EPROTO, f"{v} is over {hi}")
    return v


def _len_head(r: _Reader, fix_base: int, fix_bits: int, forms: List[int], widths: List[int],
              what: str) -> int:
    b = r.byte()
    if fix_bits and (b & ~((1 << fix_bits) - 1)) == fix_base:
        return b & ((1 << fix_bits) - 1)
    for i, (form, w) in enumerate(zip(forms, widths)):
        if b == form:
            n = r.be(w)
            smallest = (1 << fix_bits) if fix_bits else 0
            if i > 0:
                smallest = 1 << (8 * widths[i - 1])
            _canon(n >= smallest, what)
            return n
    raise WireError(Status.EPROTO, f"expected {what}")


def _read_str(r: _Reader, lo: int, hi: int, name: bool) -> str:
    n = _len_head(r, 0xA0, 5, [0xD9, 0xDA, 0xDB], [1, 2, 4], "a str")
    if n > hi:
        raise WireError(Status.ETOOBIG, f"str of {n} octets, over {hi}")
    b = r.take(n)
    if n < lo:
        raise WireError(Status.EPROTO, "empty str")
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError(Status.EPROTO, "str is not UTF-8") from None
    if name and any(c < 0x20 or c == 0x7F for c in b):
        raise WireError(Status.EPROTO, "control character in a name")
    return s


def _read_bin(r: _Reader, hi: int) -> bytes:
    n = _len_head(r, 0, 0, [0xC4, 0xC5, 0xC6], [1, 2, 4], "a bin")
    if n > hi:
        raise WireError(Status.ETOOBIG, f"bin of {n} octets, over {hi}")
    return r.take(n)


def _read_bool(r: _Reader) -> bool:
    b = r.byte()
    if b == 0xC3:
        return True
    if b == 0xC2:
        return False
    raise WireError(Status.EPROTO, "expected a bool")


def _skip(r: _Reader, depth: int) -> None:
    """Checks and skips the value of an unknown key (envelope.md 3.1)."""
    if depth > DEPTH_MAX:
        raise WireError(Status.ETOOBIG, "nested too deep")
    b = r.peek()
    if b < 0x80 or b in (0xCC, 0xCD, 0xCE, 0xCF):
        _read_uint(r, (1 << 64) - 1)
    elif b >= 0xE0:
        r.byte()
    elif b in (0xD0, 0xD1, 0xD2, 0xD3):
        r.byte()
        w = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}[b]
        v = int.from_bytes(r.take(w), "big", signed=True)
        _canon(v < 0 and (w == 1 and v < -32 or w > 1 and v < -(1 << (8 * (w // 2) - 1))),
               "a signed integer")
    elif b in (0xC0, 0xC2, 0xC3):
        r.byte()
    elif (b & 0xE0) == 0xA0 or b in (0xD9, 0xDA, 0xDB):
        _read_str(r, 0, MSG_MAX, False)
    elif b in (0xC4, 0xC5, 0xC6):
        _read_bin(r, MSG_MAX)
    elif (b & 0xF0) == 0x90 or b in (0xDC, 0xDD):
        n = _len_head(r, 0x90, 4, [0xDC, 0xDD], [2, 4], "an array")
        for _ in range(n):
            _skip(r, depth + 1)
    elif (b & 0xF0) == 0x80 or b in (0xDE, 0xDF):
        n = _len_head(r, 0x80, 4, [0xDE, 0xDF], [2, 4], "a map")
        prev: Any = None
        for _ in range(n):
            k: Any
            if r.peek() < 0x80 or r.peek() in (0xCC, 0xCD, 0xCE, 0xCF):
                k = _read_uint(r, (1 << 32) - 1)
            else:
                k = _read_str(r, 0, MSG_MAX, False).encode("utf-8")
            if prev is not None:
                if type(k) is not type(prev):
                    raise WireError(Status.EPROTO, "a map mixes integer and str keys")
                if k == prev:
                    raise WireError(Status.EPROTO, "duplicate key")
                if k < prev:
                    raise WireError(Status.ENONCANON, "keys out of order")
            prev = k
            _skip(r, depth + 1)
    else:  # floats, ext, 0xc1
        raise WireError(Status.EPROTO, f"type 0x{b:02x} not allowed in a control message")


def _read_map(r: _Reader, fields: dict) -> dict:
    """Reads a body map with integer keys; ``fields`` maps a known key to its reader."""
    n = _len_head(r, 0x80, 4, [0xDE, 0xDF], [2, 4], "a map")
    out: dict = {}
    prev = -1
    for _ in range(n):
        k = _read_uint(r, (1 << 32) - 1) if (r.peek() < 0x80 or r.peek() in (0xCC, 0xCD, 0xCE, 0xCF)) \
            else None
        if k is None:
            raise WireError(Status.EPROTO, "a body map key is not an integer")
        if k == prev:
            raise WireError(Status.EPROTO, "duplicate key")
        if k < prev:
            raise WireError(Status.ENONCANON, "keys out of order")
        prev = k
        if k in fields:
            out[k] = fields[k](r)
        else:
            _skip(r, 1)
    if r.p != len(r.d):
        raise WireError(Status.EPROTO, "octets after the body map")
    return out


def check_header(hdr: bytes, msg_type: int, body_len: int) -> None:
    """envelope.md 2.2, in order."""
    if len(hdr) < 4:
        raise WireError(Status.ETRUNC, "header shorter than 4 octets")
    if len(hdr) > 4:
        raise WireError(Status.EPROTO, "header longer than 4 octets")
    if hdr[:2] != MAGIC:
        raise WireError(Status.EPROTO, "bad magic")
    if hdr[2] != VERSION:
        raise WireError(Status.EVERSION, f"version {hdr[2]}")
    if hdr[3] != msg_type:
        raise WireError(Status.ETYPE, f"type {hdr[3]}")
    if body_len > MSG_MAX:
        raise WireError(Status.ETOOBIG, "body over 4 MiB")


def _args(r: _Reader) -> List[bytes]:
    n = _len_head(r, 0x90, 4, [0xDC, 0xDD], [2, 4], "an array")
    if n > ARGS_MAX:
        raise WireError(Status.ETOOBIG, f"{n} arguments, over {ARGS_MAX}")
    return [_read_bin(r, ARG_MAX) for _ in range(n)]


def decode_req(hdr: bytes, body: bytes) -> CtlReq:
    """Decodes a CTL_REQ (raises WireError with the spec's status)."""
    check_header(hdr, CTL_REQ, len(body))
    m = _read_map(_Reader(body), {3: lambda r: _read_uint(r, (1 << 32) - 1),
                                  4: lambda r: _read_str(r, 1, CMD_MAX, True),
                                  5: _args})
    if set(m) != {3, 4, 5}:
        raise WireError(Status.EPROTO, "a required key is missing")
    return CtlReq(m[3], m[4], m[5])


def decode_rep(hdr: bytes, body: bytes) -> CtlRep:
    """Decodes a CTL_REP (raises WireError with the spec's status)."""
    check_header(hdr, CTL_REP, len(body))
    m = _read_map(_Reader(body), {3: lambda r: _read_uint(r, (1 << 32) - 1),
                                  4: lambda r: _read_uint(r, (1 << 32) - 1),
                                  5: _read_bool,
                                  6: lambda r: _read_bin(r, REP_BODY_MAX)})
    if set(m) != {3, 4, 5, 6}:
        raise WireError(Status.EPROTO, "a required key is missing")
    return CtlRep(m[3], m[4], m[5], m[6])
