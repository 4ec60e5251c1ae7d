"""Fixtures of the mas tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def forget_file_systems():
    """Systems loaded from files in a test leave the process-wide registry afterwards."""
    from mars_eval.mas import registry

    registry.system_names()  # the built-ins loaded first, so that they are restored too
    before = dict(registry._SYSTEMS)
    yield
    registry._SYSTEMS.clear()
    registry._SYSTEMS.update(before)
