"""Sequence readers for every benchmark and the embedded synthetic video dataset."""
