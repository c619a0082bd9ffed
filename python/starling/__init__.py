"""Starling from Python: a client for a peer's control endpoint
(:class:`Client`) and the reporter for command trainers (:func:`report`,
:func:`checkpoint_dir`). Written from proto/control.md; see docs/python.md.

Elastic jobs are not built yet in Starling; this package has no API for
them (no rank or rendezvous environment) until they are."""
from .client import Client, default_peer, load_key, resolve_peer
from .errors import ConnectionFailed, ProtocolError, StarlingError, Status
from .trainer import checkpoint_dir, config, epochs, report, save_file, trial_id

__version__ = "0.1.0"
__all__ = ["Client", "StarlingError", "ConnectionFailed", "ProtocolError", "Status", "report",
           "checkpoint_dir", "save_file", "trial_id", "epochs", "config", "default_peer", "resolve_peer",
           "load_key"]
