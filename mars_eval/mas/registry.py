"""The system registry: the only way systems are found.

Built-in systems register themselves with `@register` when their module is imported (the list
`BUILTIN_MODULES` says which modules hold them, in the order `list` shows them). What tables and
reports know of systems (their order, family, debaters, the default matched system) is read
from the systems' declarations here (`ordered_systems`, `system_family`, ...). Others come
from an installed package's entry point (group `mars_eval.systems`, `name = "pkg.module:Class"`)
or from a file: `--system path/to/file.py:ClassName`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import sys
from typing import Any

from mars_eval.mas.system import OptionSpec, System, option_specs
from mars_eval.models.base import ConfigError

BUILTIN_MODULES = (
    "single",
    "mad",
    "autogen_chat",
    "du_debate",
    "vote",
    "dylan",
    "agentverse",
    "macnet",
)
ENTRY_POINT_GROUP = "mars_eval.systems"
# A system's name is part of its run folders' names: one path part, never "/" or "..".
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]*(\.[A-Za-z0-9_+-]+)*")
MAX_NAME = 64

_SYSTEMS: dict[str, type[System]] = {}
_loaded = False


def register(cls: type[System]) -> type[System]:
    """Class decorator: add a system to the registry under its `name` (its options are checked
    now, so a bad declaration fails at import, not mid-run)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} must declare a `name`")
    if len(name) > MAX_NAME or not SAFE_NAME.fullmatch(name):
        shown = repr(name[:MAX_NAME]) + ("..." if len(name) > MAX_NAME else "")
        raise TypeError(
            f"{cls.__name__}.name {shown} is not a safe name (it names run folders): letters, digits "
            f"and _ + - . only, no '/' or '..', at most {MAX_NAME} characters"
        )
    option_specs(cls.Options)
    other = _SYSTEMS.get(name)
    if other is not None and other is not cls and other.__qualname__ != cls.__qualname__:
        raise TypeError(f"two systems are named {name!r}: {other.__qualname__} and {cls.__qualname__}")
    _SYSTEMS[name] = cls
    return cls


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        importlib.import_module(f"mars_eval.mas.{module}")
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except (Exception, SystemExit) as exc:  # a broken plug-in must not take the built-ins down
            print(f"warning: system entry point {ep.name!r} did not load: {exc}", file=sys.stderr)
            continue
        if isinstance(cls, type) and issubclass(cls, System):
            try:
                register(cls)
            except Exception as exc:
                print(f"warning: system entry point {ep.name!r} is not usable: {exc}", file=sys.stderr)


def system_names() -> tuple[str, ...]:
    """Every registered system's name, built-ins first in their modules' listed order."""
    _load_builtins()
    modules = [f"mars_eval.mas.{m}" for m in BUILTIN_MODULES]

    def place(name: str) -> int:
        module = _SYSTEMS[name].__module__
        return modules.index(module) if module in modules else len(modules)

    return tuple(sorted(_SYSTEMS, key=place))  # stable: a module's systems in definition order


def ordered_systems(names: list[str] | tuple[str, ...]) -> list[str]:
    """Distinct system names in table order: those declaring a `table_order` by it, then the
    rest by name (a name that is not registered, such as a file's system not loaded now, too)."""

    def key(name: str) -> tuple[int, float, str]:
        rank = _declared(name, "table_order", None)
        return (0, rank, name) if isinstance(rank, int | float) else (1, 0, name)

    return sorted(dict.fromkeys(names), key=key)


def system_family(name: str) -> str | None:
    """The `family` a system declares ("debate"), None for none or an unknown system."""
    return _declared(name, "family", None)


def system_debaters(name: str) -> tuple[str, ...]:
    """The transcript agents whose answers a debate system's rounds hold (`debaters`)."""
    return tuple(_declared(name, "debaters", ()))


def default_match_system() -> str:
    """The system a compute-matched run is matched to unless --match-system names one: the one
    declaring `matched_by_default` (the first in listed order if several do), else the first."""
    names = system_names()
    return next((n for n in names if _SYSTEMS[n].matched_by_default), names[0])


def default_system() -> str:
    """The system run when none is named: the one declaring `run_by_default`, else the first."""
    names = system_names()
    return next((n for n in names if _SYSTEMS[n].run_by_default), names[0])


def _declared(name: str, attribute: str, default: Any) -> Any:
    _load_builtins()
    cls = _SYSTEMS.get(name)
    return getattr(cls, attribute, default) if cls is not None else default


def system_class(spec: str) -> type[System]:
    """The system class of a name or of `path/to/file.py:ClassName` (ConfigError with a
    "did you mean" when it is neither)."""
    if ":" in spec and spec.split(":", 1)[0].endswith(".py"):
        return _from_file(spec)
    _load_builtins()
    if spec in _SYSTEMS:
        return _SYSTEMS[spec]
    close = difflib.get_close_matches(spec, list(_SYSTEMS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"unknown system {spec!r}{hint} (systems: {', '.join(system_names())}, or FILE.py:CLASS)"
    )


def _from_file(spec: str) -> type[System]:
    """A system class from a Python file of the user's own (their code, run as any plug-in is)."""
    from mars_eval.paths import check_path

    path_text, _, class_name = spec.rpartition(":")
    path = check_path(path_text, "--system", "file")
    shown = f"{path_text[:120]!r}:{class_name[:80]}"
    module_name = f"mars_eval_user_system_{abs(hash(str(path.resolve())))}"
    module = sys.modules.get(module_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ConfigError(f"--system {shown}: cannot import it")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # sys.exit() at import is no system either
            del sys.modules[module_name]
            what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else _one_line(exc)
            raise ConfigError(f"--system {shown}: importing it failed: {what}") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, System)):
        raise ConfigError(f"--system {shown}: no System subclass named {class_name[:80]!r}")
    try:
        return register(cls)
    except (Exception, SystemExit) as exc:  # a bad declaration: a name in use, an option without default
        what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else _one_line(exc)
        raise ConfigError(f"--system {shown}: {what}") from None


def _one_line(exc: BaseException) -> str:
    """`exc` as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def all_option_specs() -> dict[str, list[tuple[str, OptionSpec]]]:
    """Every option any registered system declares: name -> [(system, spec), ...]."""
    out: dict[str, list[tuple[str, OptionSpec]]] = {}
    for name in system_names():
        for spec in option_specs(_SYSTEMS[name].Options):  # noqa: B007
            out.setdefault(spec.name, []).append((name, spec))
    return out


def make_system(name: str, *, prompts: Any = None, **options: Any) -> System:
    """Build a system by name (or FILE.py:CLASS) with options by name; None means the default.
    Options the system does not declare are refused (ConfigError)."""
    return system_class(name)(prompts=prompts, **options)


def options_for(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """Of the options given to a run (by name, None = not given), those system `name` declares."""
    declared = {s.name for s in option_specs(system_class(name).Options)}
    return {k: v for k, v in given.items() if k in declared and v is not None}


def check_unused(systems: list[str] | tuple[str, ...], given: dict[str, Any]) -> None:
    """An option given that none of `systems` declares: ConfigError, one line ("--votes is used by
    vote only"). `given`: options by name, None = not given."""
    declared = {s.name for name in systems for s in option_specs(system_class(name).Options)}
    users = all_option_specs()
    for key, value in given.items():
        if value is None or key in declared:
            continue
        names = [s for s, _ in users.get(key, [])]
        flag = "--" + key.replace("_", "-")
        if not names:
            raise ConfigError(f"no chosen system has an option {key!r} ({flag})")
        named = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        raise ConfigError(f"{flag} is used by {named} only")
