#!/usr/bin/env python3
"""The command of client_test.py's elastic command job: no torch, only
starling.elastic. Prints its World as one JSON line (the test reads it
back from `logs`), then reports three steps and an epoch as a training
script's rank 0 would, and ends with status 0 (the job is done)."""
import dataclasses
import json
import os

from starling import elastic

w = elastic.world()
print("world " + json.dumps(dataclasses.asdict(w)), flush=True)
print("checkpoint_dir exists: %s" % (w.checkpoint_dir is not None and
                                      os.path.isdir(w.checkpoint_dir)), flush=True)
if w.is_rank0:
    for step in (1, 2, 3):
        elastic.report_step(step, loss=1.0 / step, epoch=1)
    elastic.report_epoch(1, train_loss=0.5, test_acc=0.75)
