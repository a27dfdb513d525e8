"""Actors: one per method; each runs its network on a batch and returns (loss, named stats)."""

from ltr.actors.dimp import DiMPActor

__all__ = ["DiMPActor"]
