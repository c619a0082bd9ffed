"""What a command trainer needs (docs/studies.md, "Command"): report one
JSON object per epoch on stdout, resume from $STARLING_CHECKPOINT_DIR."""
from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any, Dict, Optional, TextIO

_NAME = re.compile(r"^[A-Za-z0-9_./-]{1,64}$")


def report(epoch: int, *, file: Optional[TextIO] = None, **metrics: float) -> None:
    """Reports one epoch to the peer running this trial, like Ray Tune's
    ``report`` or AutoGluon's ``reporter``: prints ``{"epoch": N, ...}`` as
    one line on stdout and flushes it. ``epoch`` counts from 1; metrics are
    finite numbers (bools count as 1/0) named with letters, digits and
    ``_-./``; at most 32 metrics and 4 KiB a line. A bad value raises
    ValueError here rather than being counted as garbage by the peer."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise ValueError("epoch must be an integer from 1")
    if len(metrics) > 32:
        raise ValueError("at most 32 metrics a report")
    out: Dict[str, Any] = {"epoch": epoch}
    for name, v in metrics.items():
        if not _NAME.match(name):
            raise ValueError(f"metric name {name!r}: letters, digits and _-./ only")
        if isinstance(v, bool):
            v = int(v)
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"metric {name!r} must be a number") from None
        if not math.isfinite(f):
            raise ValueError(f"metric {name!r} must be finite, not {f}")
        out[name] = v if isinstance(v, int) else f
    line = json.dumps(out, separators=(",", ":"))
    if len(line) > 4096:
        raise ValueError("a report line is at most 4 KiB")
    stream = file if file is not None else sys.stdout
    stream.write(line + "\n")
    stream.flush()


def checkpoint_dir() -> Optional[str]:
    """The directory this trial checkpoints into (``$STARLING_CHECKPOINT_DIR``),
    or None outside a peer. It holds the last replicated checkpoint when the
    trial resumes (on this or another peer). Write each file whole: to a
    name containing ``.tmp``, then ``os.replace`` it (see :func:`save_file`)."""
    d = os.environ.get("STARLING_CHECKPOINT_DIR")
    return d or None


def save_file(name: str, data: bytes) -> Optional[str]:
    """Writes ``data`` to ``checkpoint_dir()/name`` atomically (a ``.tmp``
    file renamed); returns the path, or None outside a peer."""
    d = checkpoint_dir()
    if d is None:
        return None
    path = os.path.join(d, name)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


def trial_id() -> Optional[str]:
    """``$STARLING_TRIAL_ID``, or None outside a peer."""
    return os.environ.get("STARLING_TRIAL_ID") or None


def epochs() -> Optional[int]:
    """The epoch this run should stop after (``$STARLING_EPOCHS``: the
    target of the trial's current rung), or None outside a peer. The peer
    stops reading after that epoch's report, so train up to it, no further."""
    e = os.environ.get("STARLING_EPOCHS")
    return int(e) if e else None


def config() -> Dict[str, Any]:
    """This trial's config (``$STARLING_CONFIG``, parsed), {} outside a peer."""
    c = os.environ.get("STARLING_CONFIG")
    return json.loads(c) if c else {}
