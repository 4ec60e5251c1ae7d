"""argparse help drawn like typer's: `mars-train --help` looks like `mars-eval --help`.

mars-train parses with argparse (torchrun starts it as `python -m training.cli`); this parser
only changes how its help is drawn: a "Usage:" line, the description, and an "Options" panel
with each option's metavar, help and `[default: ...]`, in typer's own styles (read from
typer.rich_utils, so the two CLIs stay alike when typer changes them).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
from typing import NoReturn

import typer.rich_utils as ru
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mars_eval.run.failures import BAD_INPUT


class RichHelpParser(argparse.ArgumentParser):
    """An ArgumentParser whose help is a typer-style panel; `defaults` maps an option's dest to
    the text shown as its default where the parsed default (None) says nothing useful."""

    def __init__(self, *args: object, defaults: dict[str, str] | None = None, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.shown_defaults = dict(defaults or {})

    def default_text(self, action: argparse.Action) -> str | None:
        """What `[default: ...]` says for an action (None: nothing to show, as for --help)."""
        # --version has no default either (argparse keeps its ==SUPPRESS== sentinel there)
        no_default = isinstance(action, (argparse._HelpAction, argparse._VersionAction))
        if no_default or "default:" in (action.help or ""):
            return None
        if action.dest in self.shown_defaults:
            return self.shown_defaults[action.dest]
        if isinstance(action, argparse._StoreTrueAction):
            return "off"
        if action.default is None or action.default == "" or action.default == []:
            return "none"
        return str(action.default)

    def _row(self, action: argparse.Action) -> tuple[Text, Text, Text]:
        names = Text(
            ", ".join(action.option_strings) or (action.metavar or action.dest), style=ru.STYLE_OPTION
        )
        if action.nargs == 0:
            kind = "bool"
        elif action.choices:
            kind = "|".join(map(str, action.choices))
        else:
            kind = getattr(action.type, "__name__", "str")
        metavar = Text(f"<{kind}>", style=ru.STYLE_TYPES)
        words = action.help or ""
        help_text = Text.from_markup(escape(words[:1].upper() + words[1:]))
        default = self.default_text(action)
        if default is not None:
            help_text.append(" ")
            help_text.append(f"[default: {default}]", style=ru.STYLE_OPTION_DEFAULT)
        if action.required and action.nargs not in ("*", "?"):
            help_text.append(" [required]", style=ru.STYLE_REQUIRED_LONG)
        return names, metavar, help_text

    def _panel(self, title: str, actions: list[argparse.Action]) -> Panel:
        table = Table(
            highlight=True, show_header=False, expand=True, box=None, padding=ru.STYLE_OPTIONS_TABLE_PADDING
        )
        for action in actions:
            table.add_row(*self._row(action))
        return Panel(
            table,
            border_style=ru.STYLE_OPTIONS_PANEL_BORDER,
            title=title,
            title_align=ru.ALIGN_OPTIONS_PANEL,
            box=box.ROUNDED,
        )

    def format_usage(self) -> str:
        return f"Usage: {self.usage_line()}\n"

    def error(self, message: str) -> NoReturn:
        """A usage error in one line (the project's rule for bad input), exit status 2."""
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def usage_line(self) -> str:
        """`prog [OPTIONS] ARGS`, as typer writes it (the options are in the panel below)."""
        parts = [self.prog, "[OPTIONS]"]
        for action in self._actions:
            if action.option_strings:
                continue
            name = str(action.metavar or action.dest).upper()
            parts.append(
                {"*": f"[{name}]...", "+": f"{name}...", "?": f"[{name}]"}.get(str(action.nargs), name)
            )
        return " ".join(parts)

    def format_help(self) -> str:
        width = int(os.environ.get("COLUMNS") or shutil.get_terminal_size((100, 24)).columns)
        out = io.StringIO()
        console = Console(file=out, width=min(width, ru.MAX_WIDTH or width), force_terminal=False)
        line = Text.assemble(("Usage: ", ru.STYLE_USAGE), (self.usage_line(), ru.STYLE_USAGE_COMMAND))
        console.print(line)
        console.print()
        if self.description:
            console.print(Text(self.description))
            console.print()
        positionals = [a for a in self._actions if not a.option_strings]
        options = [a for a in self._actions if a.option_strings]
        if positionals:
            console.print(self._panel(ru.ARGUMENTS_PANEL_TITLE, positionals))
        console.print(self._panel(ru.OPTIONS_PANEL_TITLE, options))
        if self.epilog:
            console.print(Text(self.epilog))
        return out.getvalue()
