"""A declared setting: name, type, default, help, the range it must lie in, and its flag.

One record type for every value a user gives by name (a sampling field, a run option, a
system option): the command line's flags and help, the Python API's keyword checks and the
JSON written to run folders all read the same declaration, so a setting is checked once, the
same way, wherever it comes from. `Setting.check` is that check: it converts text (from `-S
key=value` or a TOML file) and refuses, in one line naming the flag, a value of the wrong type,
out of range, outside its choices, or a float that is not finite (NaN and infinity are not JSON
and no sampler takes them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """Bad user input found before any work: printed as one line, exit code 2."""


_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


@dataclass(frozen=True)
class Setting:
    """One declared setting. `low`/`high` bound numbers (`*_open`: the bound itself excluded);
    `nullable`: None is a value of its own (else None means "not given")."""

    name: str
    type: type  # int, float, str or bool
    default: Any
    help: str
    shown: str | None = None  # how help shows the default, when not the value itself
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    flag: str | None = None  # "--top-p"; None: the name with dashes

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def shown_default(self) -> str:
        return self.shown if self.shown is not None else str(self.default)

    @property
    def range_text(self) -> str:
        """ "in (0, 1]", "at least 0", "at most 5", or "" when unbounded."""
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"more than {_num(self.low)}" if self.low_open else f"at least {_num(self.low)}"
        if self.high is not None:
            return f"less than {_num(self.high)}" if self.high_open else f"at most {_num(self.high)}"
        return ""

    def check(self, value: Any, *, from_text: bool = True) -> Any:
        """`value` (None: not given, returned as is) as this setting's type, checked; text is
        converted when `from_text` (command-line and file values; the Python API passes values
        of their own type). ConfigError (one line, naming the flag) when it does not fit."""
        if value is None:
            return None
        flag, kind = self.cli_flag, self.type
        if from_text and isinstance(value, str) and kind is not str:
            value = _from_text(flag, kind, value)
        if kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{flag} must be true or false, got {_shown(value)}")
            return value
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{flag} must be an integer, got {_shown(value)}")
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{flag} must be a number, got {_shown(value)}")
            if not math.isfinite(value):
                raise ConfigError(f"{flag} must be a finite number, got {value}")
            value = float(value)
        elif kind is str and not isinstance(value, str):
            raise ConfigError(f"{flag} must be text, got {_shown(value)}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"unknown {flag} {value!r}; choose one of: {', '.join(self.choices)}")
        if kind in (int, float) and not self._in_range(value):
            raise ConfigError(f"{flag} must be {self.range_text} (got {_num(value)})")
        return value

    def _in_range(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))


def _from_text(flag: str, kind: type, value: str) -> Any:
    text = value.strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{flag} must be true or false, got {value!r}")
    try:
        return kind(text)
    except (ValueError, OverflowError):
        name = "an integer" if kind is int else "a number"
        raise ConfigError(f"{flag} must be {name}, got {value!r}") from None


def _num(x: float) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() and abs(x) < 1e15 else str(x)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
