#!/usr/bin/env bash
# Garbage sent to a peer's port (random bytes, an HTTP request, ZeroMQ
# messages with bad headers and bodies) is counted and the peer keeps
# working.
. "$(dirname "$0")/lib.sh"
cluster_init
start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "2 peers converge" converged p0 p1

python3 - "${PORT[p0]}" <<'PY'
import os, socket, struct, sys
port = int(sys.argv[1])

def raw(data):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(3)
    try:  # the peer may hang up at any point: that is fine
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()

raw(b"GET / HTTP/1.0\r\n\r\n")
raw(os.urandom(4096))
raw(b"\xff" + os.urandom(100))

# A ZMTP 3.0 NULL-mechanism DEALER speaking by hand, then bad messages.
def frame(data, more):
    flags = 1 if more else 0
    if len(data) > 255:
        return bytes([flags | 2]) + struct.pack(">Q", len(data)) + data
    return bytes([flags, len(data)]) + data

s = socket.create_connection(("127.0.0.1", port))
s.settimeout(5)
greeting = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + b"\0" * 31
s.sendall(greeting)
got = b""
while len(got) < 64 or b"READY" not in got:  # the peer's greeting and READY
    chunk = s.recv(4096)
    if not chunk:
        sys.exit("the peer closed the ZMTP connection during the handshake")
    got += chunk
prop = b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
ready = b"\x05READY" + prop
s.sendall(bytes([4, len(ready)]) + ready)
bad = [
    (b"XX\x01\x01", b"\x80"),               # wrong magic
    (b"SL\x09\x01", b"\x80"),               # unknown version
    (b"SL\x01\x63", b"\x80"),               # unknown type
    (b"SL\x01\x01", b"\xc1\xc1\xc1"),       # not msgpack
    (b"SL\x01\x01", os.urandom(300)),       # random body
    (b"SL\x01\x40", b"\x81\x03"),           # truncated control request
    (b"SL\x01", b"short header"),           # 3-byte header
]
for h, b in bad:
    s.sendall(frame(h, True) + frame(b, False))
s.sendall(frame(b"one frame only", False))
s.shutdown(socket.SHUT_WR)  # the peer reads everything, then sees the end
try:
    while s.recv(4096):
        pass
except OSError:
    pass
s.close()
PY

# bad_input sums handshake failures, bad frames and codec rejections.
wait_until 20 "p0 counts the garbage" stat_at_least p0 bad_input 9
log "p0 stats so far: handshake_failed=$(stat_of p0 net.handshake_failed) bad_frames=$(stat_of p0 net.bad_frames) decode.bad=$(stat_of p0 decode.bad)"
wait_until 10 "the decoder counts the 6 bad messages" stat_at_least p0 decode.bad 6
wait_until 10 "the transport counts the 2 misshapen ones" stat_at_least p0 net.bad_frames 2
# Still working: answers, and the membership is intact.
kill -0 "${PID[p0]}" || fail "p0 died"
wait_until 10 "p0 still sees p1 alive" sees p0 p1 alive
start_peer p2 --join "$(addr_of p0)"
wait_until 30 "a new peer still joins through p0" converged p0 p1 p2
log "PASS"
