"""The shape of a samples.jsonl record, checked once where a line is read.

A line is one finished unit: a problem sample (`mas`, `suite`) or a game episode (`games`). The
store writes records as they come (plain dicts, so the bytes of existing run folders do not
change); every reader goes through `scan_records` (run/store.py), which keeps only lines that
`record_problem` accepts and names the others by line. After that check, readers may rely on
the types below. `RECORD_SCHEMA_VERSION` is the line format this version reads; it is not
written into the lines (old folders stay byte-identical and resume).

What is checked is what some reader relies on: field types, transcript entries (their text,
their counters, their message parts), the `details` the report draws as a structure, nesting at
most `MAX_RECORD_DEPTH` deep, and, where the folder's config says which unit its lines are
(`unit_of`), the ids readers pair by (a sample's `problem_id`, an episode's game and seat).
"""

from __future__ import annotations

from typing import Any, TypedDict

RECORD_SCHEMA_VERSION = 1
# The deepest nesting of objects and arrays a line may have (a record as written nests about 7
# deep: transcript, entry, new_messages, message, parts, reference). Deeper lines are skipped:
# readers recurse over what they show (the report's details, the export's JSON cells).
MAX_RECORD_DEPTH = 64


class TranscriptEntry(TypedDict, total=False):
    """One model call (or an event) of a sample; see mas/base.py for how it is written."""

    agent: Any
    role: Any
    call: int
    prompt_from: int
    new_messages: list[dict[str, Any]]  # a message's `parts`: text and {"ref": earlier entry}
    content: str | None
    thinking: str | None
    prompt_tokens: int
    completion_tokens: int
    event: str


class SampleRecord(TypedDict, total=False):
    """A samples.jsonl line once read (`key` always present; any other field may be absent)."""

    key: str
    error: str | None
    traceback: str | None
    problem_id: str | int
    sample: int
    correct: bool | int | None
    transcript: list[TranscriptEntry]
    messages: list[dict[str, Any]]
    details: dict[str, Any]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    final_text: str
    final_text_from: int
    # games episodes
    game: str
    opponent: str
    seat: str
    returns: list[Any]


# The types a line's fields must have to be read (None is always allowed): a line that is valid
# JSON with other types (edited by hand, another tool) is skipped and named.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "error": (str,),
    "maslab_error": (str,),  # --errors maslab: why MASLab's code fails this finished sample
    "problem_id": (str, int),
    "sample": (int,),
    "correct": (bool, int),
    "transcript": (list,),
    "messages": (list,),
    "details": (dict,),
    "calls": (int,),
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "final_text": (str,),
    "final_text_from": (int,),
    "game": (str,),
    "opponent": (str,),
    "seat": (str,),
    "returns": (list,),
}
_ENTRY_TEXT = ("content", "thinking")
# A transcript entry's small fields: readers count with them (int) and key by them (text).
_ENTRY_INTS = ("call", "prompt_from")  # never null when present
_ENTRY_TYPES: dict[str, tuple[type, ...]] = {
    "agent": (str,),
    "role": (str,),
    "event": (str,),
    "finish_reason": (str,),
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "latency_s": (int, float),
    "started": (int, float),
}


def nesting_problem(value: Any) -> str | None:
    """Why a parsed line nests too deep to be read (None: it does not); walks without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_RECORD_DEPTH:
            return f"nested deeper than {MAX_RECORD_DEPTH} levels"
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return None


SAMPLE, EPISODE = "sample", "episode"  # the units of `mas`/`suite` runs and of `games` runs


def unit_of(config: Any) -> str | None:
    """The unit a run folder's config.json says its lines are (None: not known, any unit)."""
    if not isinstance(config, dict):
        return None
    if config.get("command") == "games":
        return EPISODE
    return SAMPLE if "task" in config and "system" in config else None


def record_problem(rec: Any, unit: str | None = None) -> str | None:
    """Why a parsed samples.jsonl line is not a record this version reads (None: it is one).
    With `unit` (SAMPLE, EPISODE) the line must also be one of those, with what readers pair by."""
    if not isinstance(rec, dict):
        return f"a JSON {_kind(rec)}, not an object"
    if not isinstance(rec.get("key"), str):
        return '"key" is missing or not text'
    for name, kinds in _FIELD_TYPES.items():
        value = rec.get(name)
        if value is None:
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return f'"{name}" is a JSON {_kind(value)}'
    why = nesting_problem(rec) or (_unit_problem(rec, unit) if unit else None)
    if why is not None:
        return why
    for m in rec.get("messages") or ():
        if not isinstance(m, dict):
            return '"messages" holds an entry that is not an object'
        if not isinstance(m.get("content"), str | None) or not isinstance(m.get("role"), str | None):
            return '"messages" holds a message whose role or content is not text'
    why = _details_problem(rec.get("details") or {})
    if why is not None:
        return f'"details" {why}'
    transcript = rec.get("transcript") or []
    for i, entry in enumerate(transcript):
        why = _entry_problem(entry, i, transcript)
        if why is not None:
            return f'"transcript" entry {i}: {why}'
    return None


def _unit_problem(rec: dict[str, Any], unit: str) -> str | None:
    """Why `rec` is not a `unit` with what readers pair and count by: a sample's problem id and
    index, its verdict once scored; an episode's game, opponent, seat and return."""
    finished = not rec.get("error")
    if unit == EPISODE:
        for name in ("game", "opponent", "seat"):
            if not isinstance(rec.get(name), str):
                return f'an episode\'s "{name}" is missing or not text'
        if finished and not _is_number(rec.get("agent_return")):
            return 'an episode\'s "agent_return" is missing or not a number'
        return None
    if rec.get("problem_id") is None:
        return 'a sample without "problem_id"'
    if "sample" in rec and rec["sample"] is None:
        return '"sample" is null'
    if finished and "correct" not in rec:
        return 'a sample without an error has no "correct"'
    return None


def _details_problem(details: dict[str, Any]) -> str | None:
    """Why a sample's details cannot be drawn (None when they can): the report draws MacNet's
    `graph` (an object), DyLAN's `layers` (an array) with their `importance`, AgentVerse's
    `turns` (an array) and the debate's `answers_by_round` (an array). Other keys, and these
    keys in other shapes (autogen's `turns` is a count), are only shown as JSON."""
    graph = details.get("graph")
    if isinstance(graph, dict):
        if not _list_of(graph.get("layers"), list):
            return '"graph" has "layers" that are not arrays'
        edges = graph.get("edges")
        if not _list_of(edges, list) or any(len(e) != 2 for e in edges or ()):
            return '"graph" has "edges" that are not pairs'
        if not isinstance(details.get("aggregated"), list | None):
            return '"aggregated" is not an array'
    layers = details.get("layers")
    if isinstance(layers, list):
        if not _list_of(layers, dict):
            return '"layers" is not an array of objects'
        for layer in layers:
            if any(not isinstance(layer.get(name), list | None) for name in ("agents", "answers")):
                return '"layers" has agents or answers that are not arrays'
        importance = details.get("importance")
        if not (
            importance is None or isinstance(importance, dict) and all(map(_is_number, importance.values()))
        ):
            return '"importance" is not an object of numbers'
        if not isinstance(details.get("picked"), list | None):
            return '"picked" is not an array'
    turns = details.get("turns")
    if isinstance(turns, list) and (
        not _list_of(turns, dict) or any(not isinstance(t.get("roles"), list | None) for t in turns)
    ):
        return '"turns" is not an array of objects with their roles an array'
    rounds = details.get("answers_by_round")
    if isinstance(rounds, list) and (
        not _list_of(rounds, list) or any(not isinstance(a, str | None) for r in rounds for a in r)
    ):
        return '"answers_by_round" is not an array of arrays of answers (text or null)'
    return None


def _list_of(value: Any, kind: type) -> bool:
    """None, or an array whose every item is a `kind`."""
    return value is None or (isinstance(value, list) and all(isinstance(v, kind) for v in value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _entry_problem(entry: Any, index: int, transcript: list[Any]) -> str | None:
    """Why a transcript entry cannot be shown or replayed (None: it can). Its messages' parts may
    reference only earlier entries (before `index`) that hold a reply's text."""
    if not isinstance(entry, dict):
        return f"a JSON {_kind(entry)}, not an object"
    for name in _ENTRY_TEXT:
        value = entry.get(name)
        if value is not None and not isinstance(value, str):
            return f'"{name}" is a JSON {_kind(value)}'
    for name in _ENTRY_INTS:
        if name in entry and not (isinstance(entry[name], int) and not isinstance(entry[name], bool)):
            return f'"{name}" is a JSON {_kind(entry[name])}'
    for name, kinds in _ENTRY_TYPES.items():
        value = entry.get(name)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            return f'"{name}" is a JSON {_kind(value)}'
    messages = entry.get("new_messages")
    if messages is None:
        return None
    if not isinstance(messages, list):
        return f'"new_messages" is a JSON {_kind(messages)}'
    for m in messages:
        if not isinstance(m, dict):
            return '"new_messages" holds an entry that is not an object'
        if not isinstance(m.get("content"), str | None) or not isinstance(m.get("role"), str | None):
            return '"new_messages" holds a message whose role or content is not text'
        parts = m.get("parts")
        if parts is None:
            continue
        if not isinstance(parts, list):
            return f'"parts" is a JSON {_kind(parts)}'
        for p in parts:
            if isinstance(p, str):
                continue
            ref = p.get("ref") if isinstance(p, dict) else None
            if not (isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < index):
                return "a message part is neither text nor a reference to an earlier reply"
            if not isinstance(transcript[ref].get("content"), str):
                return "a message part is neither text nor a reference to an earlier reply"
    return None


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
