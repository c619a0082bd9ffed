"""Status codes of the control protocol (proto/control.md, section 7) and
the exception a failed command raises."""
from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """A CTL_REP's ``status``: 0 or why the command failed."""

    OK = 0
    EINVAL = 1
    ENOMEM = 2
    EPROTO = 3
    ETOOBIG = 4
    EVERSION = 5
    ETYPE = 6
    ETRUNC = 7
    ENONCANON = 8
    EIO = 9
    ENOTFOUND = 10
    EEXIST = 11
    EAGAIN = 12
    ETIMEDOUT = 13
    ECORRUPT = 14
    EAUTH = 15
    EUNSUPPORTED = 16
    ECLOSED = 17
    EBUSY = 18
    ENODEV = 19
    ERANGE = 20
    ESTATE = 21
    EINTERNAL = 22

    @property
    def code_name(self) -> str:
        """The spec's name, e.g. ``SL_EINVAL``."""
        return "SL_" + self.name


def status_name(code: int) -> str:
    """``SL_...`` for a known code, ``status N`` for one this client does not know."""
    try:
        return Status(code).code_name
    except ValueError:
        return f"status {code}"


class StarlingError(Exception):
    """A command the peer refused or failed: ``status`` (an int, compare with
    :class:`Status`) and the peer's one-line ``message``."""

    def __init__(self, command: str, status: int, message: str) -> None:
        self.command = command
        self.status = status
        self.message = message
        super().__init__(f"{command}: {status_name(status)} ({status}): {message}")


class ConnectionFailed(StarlingError):
    """No answer from the peer within the timeout (``status`` is
    ``Status.ETIMEDOUT``), or its control endpoint cannot be reached."""


class ProtocolError(Exception):
    """A reply that breaks proto/control.md (a bug in the peer or the client)."""
