"""Tests of the sequence readers (ltr.dataset)."""
