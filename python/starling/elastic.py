"""What the script of an elastic command job needs (docs/elastic.md,
"Command jobs"): its place in the world, from the torchrun environment
that each peer of a world gives its command, and the progress lines the
peer reads from rank 0's output.

Pure Python: no torch here, so a script imports it before torch and a
test runs it anywhere.

    from starling import elastic
    w = elastic.world()               # RANK, WORLD_SIZE, MASTER_ADDR, ... (a lone run: rank 0 of 1)
    if w.distributed:
        torch.distributed.init_process_group("gloo")   # env:// reads the same variables
    ...
    if w.rank == 0:
        elastic.report_step(step, loss=mean_loss)      # {"step": S, "loss": L}: the job's progress
        elastic.report_epoch(epoch, test_acc=acc)      # {"epoch": E, ...}: its metrics of epoch E
"""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, TextIO

# A command's output line longer than this reaches the peer in pieces
# (docs/elastic.md, "Command jobs"), and a piece is no JSON object.
LINE_MAX = 511

# The metrics of an epoch line the peer keeps (proto/elastic.md, m/E); any
# other name is printed but not recorded.
EPOCH_METRICS = ("train_loss", "val_loss", "val_acc", "test_loss", "test_acc")


@dataclass(frozen=True)
class World:
    """This process's place in the world of an elastic command job, as the
    peer sets torchrun's environment (one process per peer: ``local_rank``
    0, ``local_world_size`` 1, ``group_rank`` = ``rank``)."""

    rank: int                 #: ``RANK``: this peer's rank in the world, 0 .. world_size-1
    local_rank: int           #: ``LOCAL_RANK``: 0 under Starling (one process per peer)
    world_size: int           #: ``WORLD_SIZE``: the world's ranks
    local_world_size: int     #: ``LOCAL_WORLD_SIZE``: 1 under Starling
    group_rank: int           #: ``GROUP_RANK``: the node's rank (= rank under Starling)
    master_addr: str          #: ``MASTER_ADDR``: rank 0's host (its script's TCPStore)
    master_port: int          #: ``MASTER_PORT``: rank 0's port
    restart_count: int        #: ``TORCHELASTIC_RESTART_COUNT``: worlds this peer ran the job in before
    run_id: str               #: ``TORCHELASTIC_RUN_ID``: the job id under Starling
    job: Optional[str]        #: ``STARLING_JOB``: the job id; None outside a peer
    round: int                #: ``STARLING_ROUND``: the world's round; 0 outside a peer
    checkpoint_dir: Optional[str]  #: ``STARLING_CHECKPOINT_DIR``; None outside a peer
    distributed: bool         #: whether ``WORLD_SIZE`` is set (init_process_group's env:// works)

    @property
    def is_rank0(self) -> bool:
        """Whether this process is rank 0, whose report lines the peer reads."""
        return self.rank == 0

    @property
    def under_starling(self) -> bool:
        """Whether a Starling peer runs this process (``STARLING_JOB`` set)."""
        return self.job is not None


def _int(env: Mapping[str, str], name: str, default: int, low: int = 0) -> int:
    text = env.get(name)
    if text is None or text == "":
        return default
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"${name} is {text!r}, not an integer") from None
    if v < low:
        raise ValueError(f"${name} is {v}, below {low}")
    return v


def world(env: Optional[Mapping[str, str]] = None) -> World:
    """This process's :class:`World`, from ``env`` (default ``os.environ``).

    Outside a peer and torchrun it is a lone run, torch's defaults: rank 0
    of 1, ``MASTER_ADDR`` 127.0.0.1, ``MASTER_PORT`` 29500, run id
    ``"none"``, no job, round 0, no checkpoint directory. A variable that is
    set but not a number (or a rank outside the world) raises ValueError,
    naming it."""
    e = os.environ if env is None else env
    size = _int(e, "WORLD_SIZE", 1, 1)
    rank = _int(e, "RANK", 0)
    if rank >= size:
        raise ValueError(f"$RANK is {rank}, outside a world of {size} ($WORLD_SIZE)")
    local_size = _int(e, "LOCAL_WORLD_SIZE", 1, 1)
    local = _int(e, "LOCAL_RANK", 0)
    if local >= local_size:
        raise ValueError(f"$LOCAL_RANK is {local}, outside $LOCAL_WORLD_SIZE {local_size}")
    port = _int(e, "MASTER_PORT", 29500)
    if port > 65535:
        raise ValueError(f"$MASTER_PORT is {port}, not a port")
    return World(
        rank=rank,
        local_rank=local,
        world_size=size,
        local_world_size=local_size,
        group_rank=_int(e, "GROUP_RANK", rank),
        master_addr=e.get("MASTER_ADDR") or "127.0.0.1",
        master_port=port,
        restart_count=_int(e, "TORCHELASTIC_RESTART_COUNT", 0),
        run_id=e.get("TORCHELASTIC_RUN_ID") or "none",
        job=e.get("STARLING_JOB") or None,
        round=_int(e, "STARLING_ROUND", 0),
        checkpoint_dir=e.get("STARLING_CHECKPOINT_DIR") or None,
        distributed="WORLD_SIZE" in e,
    )


def _number(name: str, v: Any) -> Any:
    """A finite number as JSON takes it (bools as 1/0), else ValueError."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    try:
        f = float(v)  # a numpy or torch scalar too
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, not {type(v).__name__}") from None
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, not {f}")
    return f


def _emit(out: Dict[str, Any], file: Optional[TextIO]) -> str:
    line = json.dumps(out, separators=(",", ":"))
    if len(line.encode()) > LINE_MAX:
        raise ValueError(f"a report line is at most {LINE_MAX} bytes (the peer reads longer "
                         f"ones in pieces), not {len(line.encode())}")
    stream = file if file is not None else sys.stdout
    stream.write(line + "\n")
    stream.flush()
    return line


def _count(name: str, v: Any, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name} must be an integer from {low}, not {v!r}")
    return v


def report_step(step: int, loss: Optional[float] = None, *, epoch: Optional[int] = None,
                file: Optional[TextIO] = None, **extra: Any) -> str:
    """Reports training progress: prints ``{"step": S, "loss": L}`` as one
    line on stdout and flushes it; returns the line.

    The peer running rank 0 takes such a line as the job's progress
    (``status``' ``step`` and ``metrics.train_loss``, a point of the loss
    curve of ``results`` and ``plot``); other ranks' lines only go to
    their logs. ``step``: steps done, from 0; ``loss``: the mean training
    loss since the last report, over the whole world (all-reduce it
    first), omitted when None; ``epoch`` (from 1): the epoch the step is
    in. ``extra`` fields are printed too (numbers, strings or bools) and
    ignored by the peer. A line is at most 511 bytes."""
    out: Dict[str, Any] = {"step": _count("step", step, 0)}
    if loss is not None:
        out["loss"] = _number("loss", loss)
    if epoch is not None:
        out["epoch"] = _count("epoch", epoch, 1)
    for k, v in extra.items():
        out[k] = v if isinstance(v, str) else _number(k, v)
    return _emit(out, file)


def report_epoch(epoch: int, *, file: Optional[TextIO] = None, **metrics: Any) -> str:
    """Reports an epoch's metrics: prints ``{"epoch": E, name: value, ...}``
    as one line on stdout and flushes it; returns the line.

    The peer running rank 0 records ``train_loss``, ``val_loss``,
    ``val_acc``, ``test_loss`` and ``test_acc`` (each optional) as the
    job's metrics of epoch ``E`` (``status``' ``metrics.epochs``); other
    names are printed and not kept. ``epoch`` counts from 1; values are
    finite numbers. A line is at most 511 bytes; ``step`` is refused (a
    line with ``step`` is a progress line, :func:`report_step`)."""
    out: Dict[str, Any] = {"epoch": _count("epoch", epoch, 1)}
    for k, v in metrics.items():
        if k == "step":
            raise ValueError("an epoch line cannot carry 'step' (the peer would read it as "
                             "progress): use report_step")
        out[k] = _number(k, v)
    return _emit(out, file)
