"""The registries of advantage estimators and policy losses: each declared once, found by name.

A setting names one entry and its options in one string, the same syntax for both:

    advantage=NAME[:key=value[,key=value ...]]      e.g.  advantage=gtpo:gamma=0.9
    loss=NAME[:key=value[,key=value ...]]           e.g.  loss=st-ppo:power=2
    advantage=path/to/file.py:ClassName[:key=value,...]   one's own, from a file

(one string, so it is the same in a JSON or TOML file, on the command line and in a saved
run_config.json). An entry is a class with a `name`, a one-line `summary` (its docstring's
first line when empty) and an `Options` dataclass whose fields are declared with
`option(default, help, ...)` (mars_eval/mas/system.py, the systems' declaration). An option
named like a top-level setting of TrainConfig (`gamma`, `normalization`, `reward_clip`,
`advantage_clip`: the older spelling, kept so old configs load) takes that setting's value as
its default; the spec's own `key=value` wins over it.

Bad names and options raise ConfigError (one line, exit 2 from `mars-train`), with "did you
mean" for a near miss. `mars-train --list` prints both registries (training/cli.py `registries_listing`).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mars_eval.mas.system import OptionSpec, option_specs
from mars_eval.models.base import ConfigError


@dataclass(frozen=True)
class Resolved:
    """One entry with its options resolved: what the trainer calls, and its identity."""

    kind: str  # "advantage" | "loss"
    name: str  # the registered name, or FILE.py:Class
    instance: Any  # the entry's object, built with its options
    options: dict[str, Any]  # every option's value
    defaults: dict[str, Any]  # every option's declared default

    @property
    def identity(self) -> str:
        """NAME plus the options that differ from their declared defaults (table and folder names)."""
        changed = [f"{k}={_text(v)}" for k, v in self.options.items() if v != self.defaults[k]]
        return self.name + (":" + ",".join(changed) if changed else "")


class Registry:
    """Name -> class for one kind of entry (`advantage` or `loss`), in registration order."""

    def __init__(self, kind: str, base: type) -> None:
        self.kind, self.base = kind, base
        self.entries: dict[str, type] = {}
        self._parsed: dict[str, tuple[str, type, list[tuple[str, str]]]] = {}  # a file loads once

    def register(self, cls: type) -> type:
        """Class decorator: add `cls` under its `name` (its options are checked now)."""
        name = getattr(cls, "name", "")
        if not isinstance(name, str) or not name or ":" in name or "," in name:
            raise TypeError(f"{cls.__name__} must declare a `name` without ':' or ','")
        option_specs(cls.Options)
        if name in self.entries and self.entries[name].__qualname__ != cls.__qualname__:
            raise TypeError(f"two {self.kind} entries are named {name!r}")
        self.entries[name] = cls
        return cls

    def resolve(self, spec: str, settings: Any = None) -> Resolved:
        """The entry `spec` names, built with its options; `settings` (a TrainConfig) gives the
        defaults of options named like top-level settings. ConfigError when anything is wrong."""
        if spec not in self._parsed:
            self._parsed[spec] = self._parse(spec)
        name, cls, pairs = self._parsed[spec]
        specs = option_specs(cls.Options)
        known = {s.name: s for s in specs}
        values: dict[str, Any] = {}
        for s in specs:  # the top-level setting of the same name, when there is one
            if settings is not None and hasattr(settings, s.name):
                values[s.name] = getattr(settings, s.name)
        for key, text in pairs:
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                have = ", ".join(known) or "none"
                raise ConfigError(f"{self.kind}={spec}: {name} has no option {key!r}{hint} (options: {have})")
            values[key] = text
        checked = {}
        for s in specs:
            value = values.get(s.name, s.default)
            try:
                checked[s.name] = s.convert(value)
            except ConfigError as exc:
                raise ConfigError(f"{self.kind}={spec}: {str(exc).replace(s.flag, s.name)}") from None
        try:
            instance = cls(cls.Options(**checked))
        except (ValueError, TypeError) as exc:  # a check of the entry's own
            raise ConfigError(f"{self.kind}={spec}: {exc}") from None
        return Resolved(self.kind, name, instance, checked, {s.name: s.default for s in specs})

    def _parse(self, spec: str) -> tuple[str, type, list[tuple[str, str]]]:
        text = str(spec).strip()
        if ".py:" in text:  # FILE.py:Class[:options]
            path, _, rest = text.partition(".py:")
            cls_name, _, opts = rest.partition(":")
            name = f"{path}.py:{cls_name}"
            cls = self._from_file(Path(path + ".py"), cls_name, text)
        else:
            name, _, opts = text.partition(":")
            if name not in self.entries:
                close = difflib.get_close_matches(name, list(self.entries), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(
                    f"{self.kind}={text}: unknown {self.kind} {name!r}{hint} "
                    f"(known: {', '.join(self.entries)}; or FILE.py:Class; mars-train --list)"
                )
            cls = self.entries[name]
        pairs = []
        for item in [p for p in opts.split(",") if p.strip()]:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"{self.kind}={spec}: option {item!r} is not key=value")
            pairs.append((key.strip(), value.strip()))
        return name, cls, pairs

    def _from_file(self, path: Path, cls_name: str, spec: str) -> type:
        if not path.is_file():
            raise ConfigError(f"{self.kind}={spec}: file not found: {path}")
        module_name = f"_mars_train_{self.kind}_{abs(hash(str(path.resolve())))}"
        try:
            loader = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(loader)  # type: ignore[arg-type]
            sys.modules[module_name] = module  # dataclasses look their module up
            loader.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as exc:
            raise ConfigError(
                f"{self.kind}={spec}: {path} does not load: {type(exc).__name__}: {exc}"
            ) from None
        cls = getattr(module, cls_name, None)
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise ConfigError(f"{self.kind}={spec}: {path} has no {self.base.__name__} subclass {cls_name!r}")
        try:
            option_specs(cls.Options)
        except TypeError as exc:
            raise ConfigError(f"{self.kind}={spec}: {exc}") from None
        return cls

    def listing(self, top_level: frozenset[str] = frozenset()) -> list[str]:
        """Lines for `mars-train --list`: each entry, its summary, its options (an option named
        like a top-level setting, one of `top_level`, says so: that setting gives its default)."""
        lines = []
        for name, cls in self.entries.items():
            lines.append(f"  {name:12s}{summary(cls)}")
            for s in option_specs(cls.Options):
                top = f" [default: the top-level {s.name}]" if s.name in top_level else ""
                lines.append(f"      {s.name}={_option_text(s)}  {s.help}{top}")
        return lines


def summary(cls: type) -> str:
    """An entry's one-line summary: its `summary`, else its docstring's first line."""
    text = getattr(cls, "summary", "") or (cls.__doc__ or "").strip().splitlines()[0:1]
    return text if isinstance(text, str) else (text[0] if text else "")


def _option_text(s: OptionSpec) -> str:
    choice = f" ({'|'.join(s.choices)})" if s.choices else ""
    return f"{s.shown_default}{choice}"


def _text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)


def option_fields(options: Any) -> dict[str, Any]:
    """An Options instance as a dict."""
    return dataclasses.asdict(options)
