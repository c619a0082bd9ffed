"""Starling from Python: a client for a peer's control endpoint
(:class:`Client`: studies and elastic jobs), the reporter for a study's
command trainers (:func:`report`, :func:`checkpoint_dir`) and, in
:mod:`starling.elastic`, what the script of an elastic command job needs
(:func:`world`, :func:`report_step`, :func:`report_epoch`). Written from
proto/control.md; see docs/python.md."""
from . import elastic
from .client import Client, default_peer, load_key, resolve_peer
from .elastic import World, report_epoch, report_step, world
from .errors import ConnectionFailed, ProtocolError, StarlingError, Status
from .trainer import checkpoint_dir, config, epochs, report, save_file, trial_id

__version__ = "0.1.0"
__all__ = ["Client", "StarlingError", "ConnectionFailed", "ProtocolError", "Status", "report",
           "checkpoint_dir", "save_file", "trial_id", "epochs", "config", "default_peer", "resolve_peer",
           "load_key", "elastic", "World", "world", "report_step", "report_epoch"]
