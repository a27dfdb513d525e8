"""Tracker parameter sets: ``pytracking.parameter.<tracker>.<name>.parameters()``."""
