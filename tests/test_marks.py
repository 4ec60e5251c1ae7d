"""The marks tests/conftest.py gives by what a test uses: `browser` goes to the tests that load a
page in Chromium (directly, or through a function or fixture of their module), not to every test
of a module that imports the browser helpers."""

from __future__ import annotations

import types

from tests.conftest import _users

SOURCE = """
import pytest
from tests.support.browser import load_page


def _open(page):
    return load_page(page, {})


def _check(page):
    return _open(page)


@pytest.fixture
def shown():
    return _check("about:blank")


def _table():
    return [1, 2]


def test_direct():
    load_page("about:blank", {})


def test_through_helpers():
    _check("about:blank")


def test_through_a_fixture(shown):
    assert shown


def test_plain():
    assert _table() == [1, 2]
"""


def _module() -> types.ModuleType:
    module = types.ModuleType("marks_example")
    module.__file__ = __file__
    exec(compile(SOURCE, "marks_example", "exec"), module.__dict__)
    return module


def test_browser_goes_to_the_tests_that_load_a_page(monkeypatch) -> None:
    import inspect

    module = _module()
    lines = SOURCE.splitlines(keepends=True)

    def source_of(obj):  # the example is no file: its functions' source from SOURCE
        func = getattr(obj, "__wrapped__", obj)
        start = func.__code__.co_firstlineno - 1
        return "".join(inspect.getblock(lines[start:]))

    monkeypatch.setattr(inspect, "getsource", source_of)
    users = _users(module, ("load_page",))
    loads = {"test_direct", "test_through_helpers", "test_through_a_fixture", "_open", "_check", "shown"}
    assert loads <= users
    assert "test_plain" not in users and "_table" not in users


def test_the_report_module_has_one_browser_test() -> None:
    import tests.test_html_report as report

    tests = {name for name in _users(report, ("load_page",)) if name.startswith("test_")}
    assert tests == {"test_report_in_headless_chromium"}
