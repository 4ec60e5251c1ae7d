"""Text from outside (model output, served model names, file names) made safe to print.

`plain` for a plain print or a log line, `shown` for anything rich renders. Every layer uses these,
so they sit at the bottom of the package.
"""

from __future__ import annotations

import re

from rich.markup import escape

# C0/C1 control characters (escape codes among them) and bidi overrides: shown, not obeyed.
# Lone UTF-16 surrogates (a served model id "\ud800") too: a terminal cannot be sent them at all.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def plain(text: object) -> str:
    """Text from outside for a plain print: control characters written as \\xNN (escape codes
    in a file or model name must not reach the terminal)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), str(text))


def shown(text: object) -> str:
    """Text from outside (a served model name, a path, model output) ready for rich: markup
    escaped and control characters written as \\xNN, so "[/]x" or an escape code prints as
    itself instead of crashing the table or recolouring the terminal."""
    return escape(plain(text) + " ")[:-1]  # the space: no doubled trailing backslash (we never end on a tag)
