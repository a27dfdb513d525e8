"""``nce_plus_tiny``'s runtime values for the network of train setting ``dimp/nce_plus_tiny_long`` (the same
network, trained longer on more videos), whose latest checkpoint is then the default ``--net``."""

from __future__ import annotations

import dataclasses

from pytracking.parameter.dimp.nce_plus_tiny import parameters as tiny_parameters
from pytracking.tracker.dimp.params import DiMPParams


def parameters() -> DiMPParams:
    return dataclasses.replace(tiny_parameters(), train_setting="nce_plus_tiny_long")
