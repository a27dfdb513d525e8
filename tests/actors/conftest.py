"""Shared fixtures: one torch thread (the test machines have two cores shared by many test files)."""

from tests.model_fixtures import _one_torch_thread  # noqa: F401  (autouse fixture, registered by import)
