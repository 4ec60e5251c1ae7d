"""Shared test setup: importable `tests.support`, offline hub, and a scripted-server factory."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `tests.support` must import however pytest was started
    sys.path.insert(0, str(REPO_ROOT))

# Tests never reach the hub: anything that tries fails fast instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

from tests.support.scripted_server import ScriptedServer  # noqa: E402

# The offline benchmark copies sit beside the checkout (../shared/data), in CI as here.
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., ScriptedServer]]:
    """A factory: `scripted_server(policy, latency=..., faults=...)` returns a started server,
    stopped at the end of the test."""
    started: list[ScriptedServer] = []

    def make(*args: Any, **kwargs: Any) -> ScriptedServer:
        srv = ScriptedServer(*args, **kwargs).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def shared_data() -> Path:
    """The offline copies of the benchmarks; tests using them skip when they are absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not present")
    return SHARED_DATA
