"""Shared test setup: importable `tests.support`, offline hub, a scripted-server factory, and
markers by what a test uses (cli, torchrun by module; browser by test) for a fast developer
signal."""

from __future__ import annotations

import contextlib
import inspect
import os
import re
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


# Marker -> names whose presence in a test module's globals means the module uses that thing:
# every test of such a module gets the mark (helpers call these indirectly).
_USES_BY_GLOBAL = {
    "cli": ("run_cli", "start_cli", "mars_eval_command"),  # tests.support.cli: a subprocess
}
# Marker -> names a test must call itself (or through a function or fixture of its module) to get
# the mark: only the tests that do it, not their whole module.
_USES_BY_TEST = {
    "browser": ("load_page",),  # tests.support.browser: headless Chromium
}


def _users(module: Any, uses: tuple[str, ...]) -> set[str]:
    """The names of `module`'s own functions (fixtures included) that refer to one of `uses`,
    directly or through another of them, plus `uses` themselves."""
    own: dict[str, str] = {}
    for name, obj in vars(module).items():
        func = getattr(obj, "__wrapped__", obj)  # a fixture's function
        if inspect.isfunction(func) and func.__module__ == module.__name__:
            with contextlib.suppress(OSError, TypeError):
                own[name] = inspect.getsource(func)
    found = set(uses)
    grew = True
    while grew:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(found))) + r")\b")
        new = {name for name, source in own.items() if name not in found and pattern.search(source)}
        found |= new
        grew = bool(new)
    return found


def _test_uses(item: pytest.Item, users: set[str]) -> bool:
    """Whether a test's own source refers to one of `users`, or it requests one as a fixture."""
    if users & set(getattr(item, "fixturenames", ())):
        return True
    func = getattr(item, "function", None)
    if func is None:
        return False
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return True  # unreadable: marked, a too-wide mark only makes the fast signal stricter
    return re.search(r"\b(" + "|".join(map(re.escape, sorted(users))) + r")\b", source) is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by what they use: `cli` and `torchrun` module-wide, `browser` test by test
    (only the tests that load a page in Chromium), `real_model` by module name."""
    marks_by_module: dict[str, list[str]] = {}
    users_by_module: dict[tuple[str, str], set[str]] = {}
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
        for mark, uses in _USES_BY_TEST.items():
            if not any(n in vars(module) for n in uses):
                continue
            key = (module.__name__, mark)
            if key not in users_by_module:
                users_by_module[key] = _users(module, uses)
            if _test_uses(item, users_by_module[key]):
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
