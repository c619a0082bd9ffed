"""The control client (proto/control.md): one DEALER connection to a peer's
control endpoint, requests matched to replies by id."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Union

import zmq

from .errors import ConnectionFailed, ProtocolError, StarlingError, Status
from .wire import CtlRep, CtlReq, WireError, decode_rep, encode_req

PathLike = Union[str, "os.PathLike[str]"]
CHUNK_LEN = 1 << 20  # blob chunk size (proto/blob.md)
JOB_ENDS = ("done", "failed", "cancelled")  # an elastic job's last states (control.md 4.7)
EPOCH_FIELDS = ("epoch", "step", "train_loss", "val_loss", "val_acc", "test_loss", "test_acc",
                "world", "wall_ms")


def default_peer() -> str:
    """``$STARLING_PEER``, else the data directory of a peer started with no
    options (``~/.local/share/starling/HOST-7946``), as ``peerctl`` does."""
    env = os.environ.get("STARLING_PEER")
    if env:
        return env
    host = os.uname().nodename
    home = os.environ.get("HOME")
    base = f"{home}/.local/share/starling" if home else "./starling-data"
    return f"{base}/{host}-7946"


def resolve_peer(peer: PathLike) -> str:
    """The ZeroMQ endpoint of ``peer``: ``ipc://PATH`` as given,
    ``HOST:PORT`` or ``tcp://HOST:PORT`` as TCP, anything else a data
    directory whose ``control.sock`` is the endpoint."""
    p = os.fspath(peer)
    if p.startswith("ipc://"):
        return p
    if p.startswith("tcp://"):
        return p
    if "/" not in p and ":" in p and not os.path.exists(p):
        host, _, port = p.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"peer {p!r}: not HOST:PORT, ipc://PATH or a data directory")
        return f"tcp://{host or '127.0.0.1'}:{port}"
    return "ipc://" + os.path.join(os.path.expanduser(p), "control.sock")


def load_key(path: PathLike) -> Dict[str, bytes]:
    """Reads a cluster key file (docs/security.md: ``starling-cluster-key 1``,
    ``secret = Z85``, optional ``public = Z85``); returns the Z85 keys."""
    text = Path(path).read_text()
    magic, fields = False, {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line == "starling-cluster-key 1":
            magic = True
            continue
        name, eq, value = line.partition("=")
        if not eq or name.strip() not in ("public", "secret"):
            raise ValueError(f"key file {path}: unknown line {line[:40]!r}")
        fields[name.strip()] = value.strip().encode()
    if not magic or len(fields.get("secret", b"")) != 40:
        raise ValueError(f"key file {path}: not a cluster key (make one with `peerctl keygen`)")
    public = zmq.curve_public(fields["secret"])
    if "public" in fields and fields["public"] != public:
        raise ValueError(f"key file {path}: its public key does not match its secret")
    return {"public": public, "secret": fields["secret"]}


class Client:
    """A connection to one peer's control endpoint.

    ``peer``: a data directory (its ``control.sock``), ``ipc://PATH`` or
    ``HOST:PORT`` (TCP, ``peer --control``); default ``$STARLING_PEER`` or
    the default data directory. ``key``: a cluster key file for a TCP
    endpoint of a keyed cluster (CurveZMQ with the cluster's key pair);
    default ``$STARLING_KEY``. ``timeout``: seconds to wait for each reply.

    Every command raises :class:`StarlingError` (``.status``, ``.message``)
    when the peer answers with a non-zero status, and
    :class:`ConnectionFailed` when nothing answers in time. A Client is one
    ZeroMQ socket: use it from one thread at a time (one Client per thread),
    and a separate Client for a long ``watch``.
    """

    def __init__(self, peer: Optional[PathLike] = None, key: Optional[PathLike] = None,
                 timeout: float = 10.0) -> None:
        self.endpoint = resolve_peer(peer if peer is not None else default_peer())
        key = key if key is not None else (os.environ.get("STARLING_KEY") or None)
        self.timeout = timeout
        if self.endpoint.startswith("ipc://"):
            path = self.endpoint[6:]
            if not os.path.exists(path):
                raise ConnectionFailed("connect", Status.ENOTFOUND,
                                       f"no control socket at {path}: is `peer` running with "
                                       "this data directory?")
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        if key is not None and not self.endpoint.startswith("ipc://"):
            k = load_key(key)
            self._sock.curve_serverkey = k["public"]
            self._sock.curve_publickey = k["public"]
            self._sock.curve_secretkey = k["secret"]
        self._sock.connect(self.endpoint)
        self._ids = itertools.count(random.randrange(1, 1 << 30))

    # ---- the protocol ----

    def close(self) -> None:
        """Closes the connection (a running watch ends)."""
        self._sock.close(0)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, cmd: str, args: List[Union[bytes, str]]) -> int:
        rid = next(self._ids) & 0xFFFFFFFF
        bargs = [a.encode("utf-8") if isinstance(a, str) else bytes(a) for a in args]
        self._sock.send_multipart(list(encode_req(CtlReq(rid, cmd, bargs))))
        return rid

    def _recv(self, cmd: str, rid: int, timeout: Optional[float]) -> CtlRep:
        t = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sock.poll(int(left * 1000) + 1):
                raise ConnectionFailed(cmd, Status.ETIMEDOUT,
                                       f"no reply from {self.endpoint} in {t:g} s (is the peer "
                                       "running? a TCP endpoint of a keyed cluster needs key=)")
            frames = self._sock.recv_multipart()
            if len(frames) != 2:
                continue  # not a message (envelope.md: dropped)
            try:
                rep = decode_rep(frames[0], frames[1])
            except WireError as e:
                raise ProtocolError(f"{cmd}: the peer's reply breaks the spec: {e}") from None
            if rep.id == rid:
                return rep
            # a reply to another (older, abandoned) request: discard (control.md 5)

    def stream(self, cmd: str, *args: Union[bytes, str],
               timeout: Optional[float] = None) -> Iterator[bytes]:
        """Sends one request and yields each reply part's body, until the part
        with ``more`` false. Raises StarlingError on a non-zero status."""
        rid = self._send(cmd, list(args))
        while True:
            rep = self._recv(cmd, rid, timeout)
            if rep.status != Status.OK:
                raise StarlingError(cmd, rep.status, rep.body.decode("utf-8", "replace"))
            yield rep.body
            if not rep.more:
                return

    def call(self, cmd: str, *args: Union[bytes, str], timeout: Optional[float] = None) -> bytes:
        """Runs any command; returns the concatenated body of its reply."""
        return b"".join(self.stream(cmd, *args, timeout=timeout))

    def call_json(self, cmd: str, *args: Union[bytes, str],
                  timeout: Optional[float] = None) -> Any:
        """Runs a command whose reply is JSON and parses it (exact integers stay ints)."""
        return json.loads(self.call(cmd, *args, timeout=timeout))

    # ---- peer ----

    def members(self) -> List[Dict[str, Any]]:
        """The members this peer knows, itself included (``members``)."""
        return self.call_json("members")

    def stats(self) -> Dict[str, Any]:
        """The peer's counters and gauges (``stats``), nested by module."""
        return self.call_json("stats")

    def hello(self) -> Dict[str, Any]:
        """What the peer speaks (``hello``): ``protocol`` (1), ``version``
        (its release), ``name`` and ``commands`` (every command it serves).
        A peer older than ``hello`` answers ``SL_EUNSUPPORTED``; then this
        returns its ``stats``' version and no ``commands``."""
        try:
            return self.call_json("hello")
        except StarlingError as e:
            if e.status != Status.EUNSUPPORTED:
                raise
            st = self.stats()
            return {"protocol": 1, "version": st.get("version", ""), "name": st.get("name", "")}

    def supports(self, command: str) -> bool:
        """Whether the peer serves ``command`` (from :meth:`hello`; True when
        the peer is too old to say)."""
        cmds = self.hello().get("commands")
        return True if cmds is None else command in cmds

    def version(self) -> str:
        """The peer's release (``stats``' ``version``)."""
        return str(self.stats().get("version", ""))

    # ---- store ----

    def put(self, key: str, value: Union[bytes, str]) -> None:
        """Writes a register; returns once the write is durable on this peer."""
        self.call("put", key, value)

    def get(self, key: str) -> bytes:
        """A register's value, raw bytes. ``StarlingError`` with ``Status.ENOTFOUND`` if absent."""
        return self.call("get", key)

    def delete(self, key: str) -> None:
        """Removes a key (``del``)."""
        self.call("del", key)

    def keys(self, prefix: str = "") -> List[str]:
        """Every key (starting with ``prefix``), sorted bytewise."""
        return self.call_json("keys", *([prefix] if prefix else []))

    def watch(self, prefix: str = "", timeout: Optional[float] = 30.0) -> Iterator[Dict[str, Any]]:
        """Yields one dict per change to a key under ``prefix`` (``watch-keys``),
        as it happens: ``{"key", "type", "value", "encoding"}`` or
        ``{"key", "deleted": True}``. The peer sends an empty part every few
        seconds, so ``timeout`` (seconds without any part) detects a dead
        peer. Stop by breaking out of the loop; the peer ends the watch when
        the connection closes or stops reading."""
        buf = b""
        for part in self.stream("watch-keys", *([prefix] if prefix else []), timeout=timeout):
            buf += part
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line:
                    yield json.loads(line)

    # ---- blobs ----

    def put_blob(self, path: PathLike, window: int = 4) -> str:
        """Uploads a file as a blob, streamed 1 MiB at a time; returns its
        hash (64 hex digits). The blob is replicated by the cluster."""
        size = os.path.getsize(path)
        whole = hashlib.blake2b(digest_size=32)
        chunks: List[bytes] = []
        with open(path, "rb") as f:
            while True:
                data = f.read(CHUNK_LEN)
                if not data:
                    break
                whole.update(data)
                h = hashlib.blake2b(data, digest_size=32).digest()
                got = self.call("blob-chunk", data).decode()
                if got != h.hex():
                    raise ProtocolError(f"blob-chunk: the peer named the chunk {got}, not {h.hex()}")
                chunks.append(h)
        manifest = _manifest(whole.digest(), size, chunks)
        pause = 0.002
        while True:
            rep = self.call_json("blob-commit", manifest)
            if rep.get("state") == "done":
                return str(rep["hash"])
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def get_blob(self, blob: str, path: PathLike, timeout: float = 300.0) -> int:
        """Downloads a blob into ``path`` (through a temporary file beside it,
        renamed when every chunk is there and the hash checks); returns its size."""
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            st = self.call_json("blob-fetch", blob)
            if st.get("state") == "ready":
                break
            if time.monotonic() > deadline:
                raise ConnectionFailed("blob-fetch", Status.ETIMEDOUT,
                                       f"blob {blob} not here after {timeout:g} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        whole = hashlib.blake2b(digest_size=32)
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                for i in range(int(st["chunks"])):
                    data = self.call("blob-read", blob, str(i))
                    whole.update(data)
                    f.write(data)
            if whole.hexdigest() != blob:
                raise StarlingError("blob-read", Status.ECORRUPT,
                                    f"the bytes read do not hash to {blob}")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return int(st["size"])

    def blobs(self) -> List[Dict[str, Any]]:
        """Every blob the cluster knows, with its holders (``blob-ls``)."""
        return self.call_json("blob-ls")

    # ---- studies and elastic jobs ----

    def submit(self, spec: Union[Dict[str, Any], PathLike]) -> str:
        """Submits a study or an elastic job (a dict, or a JSON file's path;
        docs/studies.md, docs/elastic.md "The job file"); returns its id
        (16 hex digits). A spec with ``"kind": "elastic"`` is a job.
        Submitting the same spec again returns the same id. A refused spec
        raises StarlingError (``Status.EINVAL``, the message naming the
        field; ``Status.EAUTH`` for a command trainer in an open cluster)."""
        if isinstance(spec, dict):
            text = json.dumps(spec).encode()
        else:
            text = Path(spec).read_bytes()
        rep = self.call_json("submit", text)
        return str(rep["job"] if "job" in rep else rep["study"])

    def status(self, target: str) -> Dict[str, Any]:
        """A study's or a job's state (``status``; ``target``: an id or a name).

        A study: budget, ``finished``, ``cancelled`` and one dict per trial
        (``trial``, ``config``, ``state``, ``epoch``, ``metrics``, ...).
        A job: ``kind`` ``"elastic"``, ``job``, ``state`` (``waiting``,
        ``running``, ``done``, ``failed``, ``cancelled``), ``step``,
        ``epoch``, ``round``, ``world`` (member names in rank order),
        ``metrics`` (``train_loss``, ``epochs``), ``rounds``, ... as
        proto/control.md section 4.7 gives it."""
        return self.call_json("status", target)

    @staticmethod
    def is_job(status: Dict[str, Any]) -> bool:
        """Whether a :meth:`status` dict is an elastic job's."""
        return status.get("kind") == "elastic"

    def watch_study(self, study: str, interval: float = 1.0,
                    until_done: bool = True) -> Iterator[Dict[str, Any]]:
        """Yields the study's status every ``interval`` seconds while it
        changes, until it is finished or cancelled (``until_done``)."""
        last = None
        while True:
            st = self.status(study)
            if st != last:
                yield st
                last = st
            if until_done and (st.get("finished") or st.get("cancelled")):
                return
            time.sleep(interval)

    def watch_job(self, job: str, interval: float = 0.5,
                  timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """Yields an elastic job's status dict (:meth:`status`) when it
        changes (its ``state``, ``step``, ``epoch``, ``round`` or
        ``world``), polling every ``interval`` seconds, the first one at
        once, until the job ends: the last dict yielded has ``state``
        ``done``, ``cancelled`` or ``failed`` (the peers could not train
        it). ``timeout``: seconds after which ConnectionFailed
        (``Status.ETIMEDOUT``) is raised if it has not ended; None waits
        for ever. A study's id raises ValueError."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            st = self.status(job)
            if not self.is_job(st):
                raise ValueError(f"{job}: a study, not an elastic job (use watch_study)")
            seen = (st.get("state"), st.get("step"), st.get("epoch"), st.get("round"),
                    tuple(st.get("world") or ()))
            if seen != last:
                last = seen
                yield st
            if st.get("state") in JOB_ENDS:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise ConnectionFailed("status", Status.ETIMEDOUT,
                                       f"job {job} still {st.get('state')} at step "
                                       f"{st.get('step')} after {timeout:g} s")
            time.sleep(interval)

    def results(self, target: str) -> List[Dict[str, Any]]:
        """Flat rows, pandas-free (``pandas.DataFrame(rows)`` works).

        A study: one dict per trial: ``trial``, ``state``, ``epoch``,
        ``owner``, ``reason``, the trial's config parameters and its last
        epoch's metrics. A job: one dict per epoch reported: ``epoch``,
        ``step``, ``train_loss``, ``val_loss``, ``val_acc``, ``test_loss``,
        ``test_acc`` (None where not measured), ``world`` (members training
        at its end), ``wall_ms``; :meth:`curve` has the loss by step."""
        st = self.status(target)
        if self.is_job(st):
            epochs = (st.get("metrics") or {}).get("epochs") or []
            return [{**{k: e.get(k) for k in EPOCH_FIELDS}, **e} for e in epochs]
        rows = []
        for t in st.get("trials", []):
            row: Dict[str, Any] = {k: t.get(k) for k in ("trial", "state", "epoch", "owner",
                                                         "failures", "reason")}
            row.update(t.get("config") or {})
            row.update(t.get("metrics") or {})
            rows.append(row)
        return rows

    def curve(self, job: str) -> List[Dict[str, Any]]:
        """An elastic job's training curve (``results``' ``curve``): one dict
        per point, ``step``, ``loss`` (mean train loss since the point
        before; None where unknown), ``world`` (members training) and
        ``wall_ms`` (Unix milliseconds), by step."""
        rep = self.report(job)
        if "curve" not in rep:
            raise ValueError(f"{job}: a study, not an elastic job")
        names = ("step", "loss", "world", "wall_ms")
        return [dict(zip(names, row)) for row in rep["curve"]]

    def report(self, target: str) -> Dict[str, Any]:
        """The ``results`` command's object. A study: leaderboard text, best
        models, Pareto front. A job: its :meth:`status` plus ``curve``
        (``[step, loss, world, wall_ms]`` rows) and, once done, ``done``."""
        return self.call_json("results", target)

    def plots(self, target: str) -> Dict[str, str]:
        """SVG text by file name (``plot``): a study's ``curves.svg`` (and
        ``pareto.svg``), a job's ``loss.svg`` and ``world.svg``."""
        return self.call_json("plot", target)

    def logs(self, target: str, trial: Optional[str] = None, *,
             peer: Optional[str] = None) -> str:
        """Log text. A study: ``logs(study, trial)``, the trial's log (its
        command's output, the peer's notes). A job: ``logs(job)``, every
        peer's log of it, each after a ``==> PEER <==`` line, or
        ``logs(job, peer=NAME)``, that peer's only (empty when it has none)."""
        if trial is not None and peer is not None:
            raise ValueError("logs: a trial (of a study) or a peer (of a job), not both")
        second = trial if trial is not None else peer
        text = self.call("logs", target, *([second] if second is not None else []))
        return text.decode("utf-8", "replace")

    def fetch(self, study: str, trial: str, path: Optional[PathLike] = None,
              timeout: float = 120.0) -> bytes:
        """A trial's trained weights (the builtin trainer's model as .npz, a
        command trial's first checkpoint file), written to ``path`` if given."""
        data = self.call("fetch", study, trial, timeout=timeout)
        if path is not None:
            Path(path).write_bytes(data)
        return data

    def fetch_model(self, job: str, path: PathLike, timeout: float = 120.0) -> int:
        """Writes an elastic job's final weights (a builtin job's model as
        ``.npz``, ``fetch JOB``) to ``path``, streamed part by part through
        a temporary file beside it that is renamed at the end; returns the
        size. The peer copies the model's blob first if it has none
        (``timeout``: seconds for each part). Before the job is done (and
        for a command job, which leaves no model in the store) it raises
        StarlingError with ``Status.ENOTFOUND``."""
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        size = 0
        try:
            with open(tmp, "wb") as f:
                for part in self.stream("fetch", job, timeout=timeout):
                    f.write(part)
                    size += len(part)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return size

    def cancel(self, target: str) -> None:
        """Cancels a study (no new trials start; running ones are stopped) or
        a job (it stops at the next step boundary on every peer; its state
        becomes ``cancelled``)."""
        self.call("cancel", target)


def _manifest(whole: bytes, size: int, chunks: List[bytes]) -> bytes:
    """The canonical manifest map (proto/blob.md, "Manifest")."""
    from .wire import _array_head, _bin, _uint
    return (b"\x84" + b"\x00" + _bin(whole) + b"\x01" + _uint(size) + b"\x02" + _uint(CHUNK_LEN)
            + b"\x03" + _array_head(len(chunks)) + b"".join(_bin(h) for h in chunks))
