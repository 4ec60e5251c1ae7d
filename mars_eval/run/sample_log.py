"""A run folder's samples.jsonl: one line per finished unit (a problem sample, a game episode),
append-only, readable as it is.

Durability: each line is written with one write() call, so a killed process leaves at most one
partial trailing line, which `load_records` drops (and, for the store holding the folder's lock,
truncates away). Later lines for the same key win, so an errored sample that succeeds on a rerun
replaces its error. A whole line that is not JSON or not a record (edited by hand) is skipped
and named (`scan_records`); its sample is run again.

A sample's `final_text`, when it is the content of one of its transcript entries, is written as
`final_text_from` (that index) by `sample_line` and restored by `expand_record`.

Bad text: lone UTF-16 surrogates (JSON "\\ud800", sent by some servers for broken tokens) cannot
be encoded as UTF-8; every reply is cleaned (`clean_text`, `clean_response`) before it is stored
or used, so no reply can make a run, or its rerun, fail. NUL characters are valid text and kept.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mars_eval.models.base import ChatResponse, ConfigError
from mars_eval.run.records import SampleRecord, record_problem
from mars_eval.run.store_errors import why as error_words

_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD, so it can be written as UTF-8 anywhere."""
    if text.isascii():  # nearly every reply: one fast C scan, no regex over long thinking
        return text
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def clean_response(resp: ChatResponse) -> ChatResponse:
    """Clean a reply's text fields in place (and return it): callers keep using the same object."""
    resp.content = clean_text(resp.content or "")
    resp.thinking = clean_text(resp.thinking or "")
    if resp.finish_reason is not None:
        resp.finish_reason = clean_text(str(resp.finish_reason))
    return resp


def clean_any(value: Any) -> Any:
    """Any JSON-like value with every text (keys included) cleaned."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_any(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_any(v) for v in value]
    return value


def must_be_file(path: Path) -> None:
    """ConfigError (one line, exit 2) when `path` is there but is no regular file: a folder would
    read as no lines, and opening a FIFO waits for a writer that never comes."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {error_words(exc)}") from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise ConfigError(f"{path} is {what}, where the run's samples file must be; move it away")


def scan_records(
    path: Path, skipped: list[str] | None = None, whole: list[int] | None = None, unit: str | None = None
) -> Iterator[tuple[int, int, SampleRecord]]:
    """(byte offset, line length, record) of every readable line of a samples.jsonl, in order,
    stopping at a torn trailing line (a killed write). A whole line that is not JSON, or not a
    record (`record_problem`), is left out and, with `skipped`, named there ("line N: why"),
    unless a later readable line of the same key replaces it. Records are as stored (see
    `expand_record` for final_text). `whole` gets the size of the whole lines once the scan ends;
    `unit` (records.SAMPLE, EPISODE) is the kind of line the run folder holds, when known."""
    bad: dict[int, tuple[str | None, str]] = {}  # line number -> (its key if any, why)
    seen_after: dict[str, int] = {}  # key -> the number of its last readable line
    offset = 0
    must_be_file(path)
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                break
            try:
                rec = json.loads(raw)
            except ValueError:  # a whole line that is not JSON (edited by hand): skipped
                bad[number] = (None, "not JSON")
            except RecursionError:  # nested deeper than the parser goes: skipped, not a crash
                bad[number] = (None, "nested too deep")
            else:
                why = record_problem(rec, unit)
                if why is None:
                    seen_after[rec["key"]] = number
                    yield offset, len(raw), rec
                else:
                    key = rec.get("key") if isinstance(rec, dict) else None
                    bad[number] = (key if isinstance(key, str) else None, why)
            offset += len(raw)
    if whole is not None:
        whole.append(offset)
    if skipped is not None:
        for number, (key, why) in bad.items():
            if key is None or seen_after.get(key, 0) < number:
                skipped.append(f"line {number}: {why}")


def load_records(
    path: Path, repair: bool = False, skipped: list[str] | None = None, unit: str | None = None
) -> dict[str, dict[str, Any]]:
    """Latest record per key; a torn trailing line (killed mid-write) is left out, and with
    `repair` (only by the store that holds the folder's lock) cut off the file. Lines that
    are not records are left out (a rerun redoes their samples), named in `skipped`."""
    records: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records
    whole: list[int] = []
    for _, _, rec in scan_records(path, skipped, whole, unit):
        expand_record(rec)
        records[rec["key"]] = rec
    if repair and whole[0] != path.stat().st_size:  # the torn tail of a killed write
        with open(path, "r+b") as f:
            f.truncate(whole[0])
    return records


def sample_line(record: dict[str, Any]) -> bytes:
    """One samples.jsonl line (UTF-8): final_text by reference when the transcript holds it; any text that
    cannot be UTF-8 (lone surrogates from outside) cleaned rather than crashing the run."""
    out = record
    final = record.get("final_text")
    if isinstance(final, str) and final:
        transcript = record.get("transcript") or []
        for i in range(len(transcript) - 1, -1, -1):
            entry = transcript[i]
            if isinstance(entry, dict) and entry.get("content") == final:
                out = {k: v for k, v in record.items() if k != "final_text"}
                out["final_text_from"] = i
                break
    line = json.dumps(out, ensure_ascii=False, default=str) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(clean_any(out), ensure_ascii=False, default=str) + "\n").encode("utf-8")


def expand_record(rec: dict[str, Any]) -> None:
    """Undo `sample_line`'s reference: restore final_text from the transcript entry it names."""
    i = rec.pop("final_text_from", None)
    if isinstance(i, int):
        transcript = rec.get("transcript") or []
        if 0 <= i < len(transcript) and isinstance(transcript[i], dict):
            rec["final_text"] = transcript[i].get("content", "")
