"""The shape of a samples.jsonl record, checked once where a line is read.

A line is one finished unit: a problem sample (`mas`, `suite`) or a game episode (`games`). The
store writes records as they come (plain dicts, so the bytes of existing run folders do not
change); every reader goes through `scan_records` (run/store.py), which keeps only lines that
`record_problem` accepts and names the others by line. After that check, readers may rely on
the types below. `RECORD_SCHEMA_VERSION` is the line format this version reads; it is not
written into the lines (old folders stay byte-identical and resume).
"""

from __future__ import annotations

from typing import Any, TypedDict

RECORD_SCHEMA_VERSION = 1


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


def record_problem(rec: Any) -> str | None:
    """Why a parsed samples.jsonl line is not a record this version reads (None: it is one)."""
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
    if any(not isinstance(m, dict) for m in rec.get("messages") or ()):
        return '"messages" holds an entry that is not an object'
    transcript = rec.get("transcript") or []
    for i, entry in enumerate(transcript):
        why = _entry_problem(entry, i, transcript)
        if why is not None:
            return f'"transcript" entry {i}: {why}'
    return None


def _entry_problem(entry: Any, index: int, transcript: list[Any]) -> str | None:
    """Why a transcript entry cannot be shown or replayed (None: it can). Its messages' parts may
    reference only earlier entries (before `index`) that hold a reply's text."""
    if not isinstance(entry, dict):
        return f"a JSON {_kind(entry)}, not an object"
    for name in _ENTRY_TEXT:
        value = entry.get(name)
        if value is not None and not isinstance(value, str):
            return f'"{name}" is a JSON {_kind(value)}'
    messages = entry.get("new_messages")
    if messages is None:
        return None
    if not isinstance(messages, list):
        return f'"new_messages" is a JSON {_kind(messages)}'
    for m in messages:
        if not isinstance(m, dict):
            return '"new_messages" holds an entry that is not an object'
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
