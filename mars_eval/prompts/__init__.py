"""Prompt packs: every prompt text the systems, tasks and games send, as data.

A pack is a YAML mapping: `name`, optional `description` and `source` (where an imported pack's
text came from: repository, commit), and `templates`, a nested mapping whose leaves are
`str.format` templates (see `schema` for the keys and their placeholders). The pack `ours`
(our own wording) ships with the package and is the default; `mars-eval prompts import mars|maslab
PATH` builds packs from a local checkout of a reference repository and stores them in the user's
data folder (`pack_dir()`), where `--prompts NAME` finds them; `--prompts FILE` loads any file
(`mars-eval prompts show NAME` writes one).

A pack's `hash` covers its templates only (not its name or description): it is part of a run's
identity, so a run with other prompt text is another run. Templates added later (`schema.LATER`)
may be missing from a pack (ours' text is used) and count in the hash only where a pack's text
differs from ours', so adding one keeps every earlier run's folder name.

A pack file is bounded before anything is built from it (docs/prompts.md): at most
`MAX_PACK_BYTES` (1 MiB, about 40 times `ours`), mappings and lists nested at most `MAX_DEPTH` (12)
deep, and no YAML anchors or aliases (`&`, `*`: an alias bomb of a few KB expands to billions of
nodes); anything else is refused in one line (exit 2).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.prompts.schema import LATER, LISTS, PLACEHOLDERS, REQUIRED

DEFAULT_PACK = "ours"
BUILTIN_PACKS = ("ours",)
MAX_PACK_BYTES = 1024 * 1024
MAX_DEPTH = 12  # the pack mapping, templates, games, hanabi, rank_counts, a text: 6 in use
_FORMATTER = string.Formatter()


def pack_dir() -> Path:
    """Where imported packs live: $XDG_DATA_HOME/mars-eval/prompts (~/.local/share by default)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mars-eval" / "prompts"


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                out.update(_flatten(value, name))
            else:
                out[name] = value
    return out


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """The nested mapping of dotted keys (how a pack is written)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def fields_of(template: str) -> set[str]:
    """The placeholder names a template uses; ValueError for a malformed one ("{", "{a.b}")."""
    names = set()
    for _, name, spec, conversion in _FORMATTER.parse(template):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(
                f"placeholder {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} is not a plain name"
            )
        names.add(name)
    return names


def check_templates(flat: dict[str, Any], where: str) -> None:
    """Refuse a pack with a missing, non-text or malformed template, or a wrong placeholder."""
    for key, allowed in PLACEHOLDERS.items():
        if key not in flat and key in LATER:
            continue  # filled from ours (`pack_from_data`)
        if key not in flat:
            raise ConfigError(f"prompt pack {where}: template {key} is missing")
        text = flat[key]
        if not isinstance(text, str):
            raise ConfigError(f"prompt pack {where}: template {key} is not text")
        try:
            used = fields_of(text)
        except ValueError as exc:
            raise ConfigError(f"prompt pack {where}: template {key}: {exc}") from None
        wrong = sorted(used - allowed)
        if wrong:
            offered = ", ".join("{" + n + "}" for n in sorted(allowed)) or "none"
            raise ConfigError(
                f"prompt pack {where}: template {key} uses unknown placeholder {{{wrong[0]}}}"
                f" (it may use: {offered})"
            )
        missing = sorted(REQUIRED.get(key, frozenset()) - used)
        if missing:
            raise ConfigError(f"prompt pack {where}: template {key} must use placeholder {{{missing[0]}}}")
    for key, least in LISTS.items():
        value = flat.get(key)
        if not isinstance(value, list) or len(value) < least or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"prompt pack {where}: {key} must be a list of at least {least} texts")
    unknown = sorted(set(flat) - set(PLACEHOLDERS) - set(LISTS))
    if unknown:
        raise ConfigError(f"prompt pack {where}: unknown template {unknown[0]}")


@dataclass
class PromptPack:
    """A loaded, checked pack. `render(key, **values)` fills a template."""

    name: str
    templates: dict[str, Any]  # flat: dotted key -> template text (or a list, see schema.LISTS)
    description: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    origin: str = ""  # where it was loaded from: "builtin", a file path

    @property
    def hash(self) -> str:
        ours = load_pack(DEFAULT_PACK).templates if LATER & set(self.templates) else {}
        hashed = {k: v for k, v in self.templates.items() if k not in LATER or v != ours.get(k)}
        blob = json.dumps(hashed, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def identity(self) -> dict[str, str]:
        """What a run's config records of its pack."""
        return {"name": self.name, "hash": self.hash}

    def text(self, key: str) -> Any:
        return self.templates[key]

    def render(self, key: str, **values: Any) -> str:
        return self.templates[key].format(**values)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name}
        if self.description:
            data["description"] = self.description
        if self.source:
            data["source"] = dict(self.source)
        data["templates"] = nest(self.templates)
        return data

    def to_yaml(self) -> str:
        """The pack as YAML; `load_pack` of that text gives the same templates back."""
        import yaml

        class _Dumper(yaml.SafeDumper):
            def ignore_aliases(self, data: Any) -> bool:
                return True  # packs are read without anchors or aliases

        def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
            # Multi-line templates as literal blocks (readable and editable as written); the
            # emitter falls back to a quoted scalar where a block cannot hold the text exactly.
            style = "|" if "\n" in value else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        _Dumper.add_representer(str, text)
        return yaml.dump(self.to_data(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def pack_from_data(data: Any, where: str, origin: str = "") -> PromptPack:
    """A checked pack from its parsed YAML mapping (ConfigError: one line)."""
    if not isinstance(data, dict) or not isinstance(data.get("templates"), dict):
        raise ConfigError(f"prompt pack {where}: not a mapping with 'name' and 'templates'")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"prompt pack {where}: 'name' must be a non-empty text")
    flat = _flatten(data["templates"])
    check_templates(flat, where)
    missing = sorted(LATER - set(flat))
    if missing:  # a pack written before these templates existed: ours' text
        ours = load_pack(DEFAULT_PACK).templates
        flat.update({k: ours[k] for k in missing})
    source = data.get("source") if isinstance(data.get("source"), dict) else {}
    return PromptPack(name.strip(), flat, str(data.get("description") or ""), dict(source), origin)


class YamlRefused(Exception):
    """A YAML text past the bounds of `bounded_yaml_loader` (its message says which)."""


def bounded_yaml_loader() -> type:
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """safe_load's loader, refusing anchors, aliases and nesting past MAX_DEPTH while it
        composes: before any alias is expanded or any deep structure is built."""

        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise YamlRefused("anchors and aliases (& and *) are not allowed; write each text out")
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise YamlRefused(f"nested deeper than {MAX_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return BoundedLoader


def _parse_yaml(text: str, where: str) -> Any:
    import yaml

    if len(text) > MAX_PACK_BYTES:  # a text given directly; a file is bounded as it is read
        raise ConfigError(f"prompt pack {where}: larger than {MAX_PACK_BYTES // 1024} KiB")
    try:
        return yaml.load(text, Loader=bounded_yaml_loader())  # noqa: S506 (a SafeLoader, bounded)
    except YamlRefused as exc:
        raise ConfigError(f"prompt pack {where}: {exc}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "bad YAML"
        raise ConfigError(f"prompt pack {where}: not valid YAML ({first[:200]})") from None


def _read_bounded(path: Path, where: str) -> str:
    """The file's text, reading at most MAX_PACK_BYTES + 1 bytes (a /dev/zero link, a huge file)."""
    with path.open("rb") as f:
        raw = f.read(MAX_PACK_BYTES + 1)
    if len(raw) > MAX_PACK_BYTES:
        raise ConfigError(
            f"prompt pack {where}: larger than {MAX_PACK_BYTES // 1024} KiB (a pack holds prompt text)"
        )
    return raw.decode("utf-8")


def builtin_text(name: str) -> str:
    return resources.files("mars_eval.prompts").joinpath(f"{name}.yaml").read_text(encoding="utf-8")


_CACHE: dict[tuple[str, float], PromptPack] = {}


def load_pack(spec: str | None = None) -> PromptPack:
    """The pack `spec` names: None or "ours" (built in), the name of an imported pack (in
    `pack_dir()`), or a YAML file path. ConfigError (one line) when none is found or it is bad."""
    spec = (spec or DEFAULT_PACK).strip()
    from mars_eval.paths import path_problem, shown_path

    problem = path_problem(spec)
    if problem is not None:
        raise ConfigError(f"--prompts {shown_path(spec)} {problem}")
    path = Path(spec).expanduser()
    looks_like_file = spec.endswith((".yaml", ".yml")) or os.sep in spec or path.is_file()
    if not looks_like_file:
        if spec in BUILTIN_PACKS:
            key = (f"builtin:{spec}", 0.0)
            if key not in _CACHE:
                _CACHE[key] = pack_from_data(_parse_yaml(builtin_text(spec), spec), spec, "builtin")
            return _CACHE[key]
        if not (pack_dir() / f"{spec}.yaml").is_file() and path.is_dir():
            raise ConfigError(f"prompt pack {spec} is a directory (give a YAML file or a pack name)")
        path = pack_dir() / f"{spec}.yaml"
        if not path.is_file():
            known = ", ".join(n for n, _ in available_packs())
            raise ConfigError(f"no prompt pack {spec!r}; known: {known} (or give a YAML file)")
    if path.is_dir():
        raise ConfigError(f"prompt pack {spec} is a directory (give a YAML file)")
    if not path.is_file():
        if path.exists():  # a FIFO, a device: reading it could block or never end
            raise ConfigError(f"prompt pack {spec} is not a regular file (give a YAML file)")
        raise ConfigError(f"prompt pack file {spec} does not exist")
    try:
        stamp = path.stat().st_mtime
        key = (str(path.resolve()), stamp)
        if key in _CACHE:
            return _CACHE[key]
        text = _read_bounded(path, spec)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"prompt pack {spec}: cannot be read ({exc})") from None
    pack = pack_from_data(_parse_yaml(text, spec), spec, str(path))
    _CACHE[key] = pack
    return pack


def available_packs() -> list[tuple[str, str]]:
    """(name, where) of the built-in packs and those imported into `pack_dir()`."""
    out = [(name, "built in") for name in BUILTIN_PACKS]
    folder = pack_dir()
    if folder.is_dir():
        out += [(p.stem, str(p)) for p in sorted(folder.glob("*.yaml")) if p.stem not in BUILTIN_PACKS]
    return out


def save_pack(pack: PromptPack) -> Path:
    """Write an (imported) pack into `pack_dir()` as NAME.yaml; the path written. The text goes
    to a temporary file first, renamed into place; when the folder cannot take it (read-only,
    full, not a folder) that file is removed and the failure is one line (ConfigError)."""
    folder = pack_dir()
    path = folder / f"{pack.name}.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    text = pack.to_yaml()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot write prompt pack {path}: {reason}") from None
    return path
