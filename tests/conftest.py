"""Shared test setup: importable `tests.support`, offline hub, a scripted-server factory, and
markers by what a test uses (cli, browser, torchrun) for a fast developer signal."""

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


# Marker -> names whose presence in a test module's globals means the module uses that thing.
_USES_BY_GLOBAL = {
    "cli": ("run_cli", "start_cli", "mars_eval_command"),  # tests.support.cli: a subprocess
    "browser": ("load_page", "chromium_path"),  # tests.support.browser: headless Chromium
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a module by what the module uses; module-wide on purpose, since
    helpers call these indirectly and a too-wide mark only makes the fast signal stricter."""
    marks_by_module: dict[str, list[str]] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        marks = marks_by_module.get(module.__name__)
        if marks is None:
            names = vars(module)
            marks = [mark for mark, uses in _USES_BY_GLOBAL.items() if any(n in names for n in uses)]
            source = Path(module.__file__ or "")
            if source.is_file() and "torch.distributed.run" in source.read_text(encoding="utf-8"):
                marks.append("torchrun")
            if module.__name__.rsplit(".", 1)[-1] == "test_real_model":
                marks.append("real_model")
            marks_by_module[module.__name__] = marks
        for mark in marks:
            item.add_marker(mark)


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
