"""Request datasets: a JSONL file of requests, or ShareGPT conversations.

JSONL, one request per line::

    {"prompt": "Explain radix attention.", "output_len": 256}
    {"input_ids": [1012, 2033, 4051], "output_len": 64}

``prompt`` (text) or ``input_ids`` (token ids, sent as they are: the server's reported
``prompt_tokens`` must equal their number), and optionally ``output_len`` (else the profile's).
A line may also be one ShareGPT conversation. ShareGPT (a JSON array, as the ShareGPT_V3 files
are, or one conversation a line)::

    [{"id": "x1", "conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}]

The first human (or user) turn is the prompt, as SGLang's and vLLM's ``bench_serving`` take it;
conversations with no turns are skipped. The output length is the profile's (without a
tokenizer the reply's length in tokens is unknown).

A dataset is read and checked before any server starts; its SHA-256 goes into the workload
fingerprint. Every error names the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Dataset", "DatasetError", "Entry", "RequestFile", "load_dataset", "read_request_file"]

#: The turn authors ShareGPT-style files use for the user's side.
USER_TURNS = ("human", "user")


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class Entry:
    """One request of a dataset: text or token ids, and its own output length if it has one."""

    prompt: str | None = None
    input_ids: tuple[int, ...] | None = None
    output_len: int | None = None
    #: What kind of text it is ("code", "chat", …), where the file says: accept lengths are
    #: shown per category, since a drafter's luck depends on the text.
    category: str | None = None


@dataclass(frozen=True)
class Dataset:
    path: Path
    format: str  # "jsonl" or "sharegpt"
    entries: tuple[Entry, ...]
    sha256: str
    skipped: int = 0  # ShareGPT conversations without a user turn

    @property
    def has_ids(self) -> bool:
        return any(e.input_ids is not None for e in self.entries)

    def describe(self) -> dict[str, Any]:
        return {"file": self.path.name, "format": self.format, "sha256": self.sha256}


@dataclass(frozen=True)
class RequestFile:
    """A request file's bytes (their SHA-256 goes into the workload fingerprint) and its text."""

    path: Path
    raw: bytes
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    def json_lines(self, what: str) -> Iterator[tuple[int, str, Any]]:
        """Each non-empty line's number, how an error names it, and its JSON value."""
        for number, line in enumerate(self.text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{what} {self.path}, line {number}"
            try:
                yield number, where, json.loads(line)
            except ValueError as exc:
                raise DatasetError(
                    f"{where}: not valid JSON ({exc.args[0]}); each line must be one JSON object"
                ) from None


def read_request_file(path: Path, what: str) -> RequestFile:
    """A dataset or trace file (``what``), which must be UTF-8 text: one decoding policy for
    both, a file that is not is refused naming its first bad line."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DatasetError(f"{what} {path}, line {line}: not UTF-8 text") from None
    return RequestFile(path, raw, text)


def load_dataset(path: Path) -> Dataset:
    file = read_request_file(path, "dataset")
    if file.text.lstrip().startswith("["):
        entries, skipped = _sharegpt_array(path, file.text)
        fmt = "sharegpt"
    else:
        entries, skipped, fmt = _jsonl(file)
    if not entries:
        raise DatasetError(
            f"dataset {path}: no requests in it"
            + (f" ({skipped} conversations without a user turn were skipped)" if skipped else "")
        )
    return Dataset(path, fmt, tuple(entries), file.sha256, skipped)


def _jsonl(file: RequestFile) -> tuple[list[Entry], int, str]:
    entries: list[Entry] = []
    skipped = 0
    kinds = set()
    for _, where, obj in file.json_lines("dataset"):
        if isinstance(obj, dict) and "conversations" in obj:
            kinds.add("sharegpt")
            entry = _conversation(where, obj)
            if entry is None:
                skipped += 1
                continue
        else:
            kinds.add("jsonl")
            entry = _request(where, obj)
        entries.append(entry)
    return entries, skipped, "sharegpt" if kinds == {"sharegpt"} else "jsonl"


def _request(where: str, obj: Any) -> Entry:
    if not isinstance(obj, dict):
        raise DatasetError(
            f"{where}: is {type(obj).__name__}, not an object such as "
            '{"prompt": "...", "output_len": 128}'
        )
    unknown = sorted(set(obj) - {"prompt", "input_ids", "output_len", "category"})
    if unknown:
        raise DatasetError(
            f"{where}: unknown field {unknown[0]!r}; a request has 'prompt' (text) or 'input_ids' "
            "(token ids), and optionally 'output_len' and 'category'"
        )
    has_prompt, has_ids = "prompt" in obj, "input_ids" in obj
    if has_prompt == has_ids:
        raise DatasetError(
            f"{where}: field 'prompt' or 'input_ids': "
            + ("both are given; keep one" if has_prompt else "neither is given; add one")
        )
    entry_ids: tuple[int, ...] | None = None
    prompt = None
    if has_prompt:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise DatasetError(
                f"{where}: field 'prompt' is {_shown(prompt)}; expected non-empty text"
            )
    else:
        ids = obj["input_ids"]
        if not (
            isinstance(ids, list)
            and ids
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)
        ):
            raise DatasetError(
                f"{where}: field 'input_ids' is {_shown(ids)}; expected a non-empty list of "
                "token ids (integers >= 0)"
            )
        entry_ids = tuple(ids)
    return Entry(prompt, entry_ids, _output_len(where, obj), _category(where, obj))


def _category(where: str, obj: dict[str, Any]) -> str | None:
    category = obj.get("category")
    if category is not None and not (isinstance(category, str) and category.strip()):
        raise DatasetError(
            f"{where}: field 'category' is {_shown(category)}; expected a short name such as "
            '"code" or "chat"'
        )
    return category.strip() if category is not None else None


def _output_len(where: str, obj: dict[str, Any]) -> int | None:
    if "output_len" not in obj:
        return None
    n = obj["output_len"]
    if not (isinstance(n, int) and not isinstance(n, bool) and n > 0):
        raise DatasetError(
            f"{where}: field 'output_len' is {_shown(n)}; expected a positive integer"
        )
    return n


def _conversation(where: str, obj: dict[str, Any]) -> Entry | None:
    turns = obj["conversations"]
    if not isinstance(turns, list):
        raise DatasetError(
            f"{where}: field 'conversations' is {_shown(turns)}; expected a list of turns "
            '{"from": "human", "value": "..."}'
        )
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("from"), str):
            raise DatasetError(
                f"{where}: field 'conversations[{k}].from' is missing or not text; a turn is "
                '{"from": "human", "value": "..."}'
            )
        if turn["from"] in USER_TURNS:
            value = turn.get("value")
            if not isinstance(value, str) or not value:
                raise DatasetError(
                    f"{where}: field 'conversations[{k}].value' is {_shown(value)}; expected the "
                    "turn's non-empty text"
                )
            return Entry(prompt=value, output_len=_output_len(where, obj))
    return None


def _sharegpt_array(path: Path, text: str) -> tuple[list[Entry], int]:
    """A JSON array of conversations, decoded element by element so errors name their line."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    entries: list[Entry] = []
    skipped = 0
    line, counted = 1, 0

    def line_at(at: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, at)
        counted = at
        return line

    while True:
        pos = _skip_space(text, pos)
        if pos < len(text) and text[pos] == "]":
            break
        where = f"dataset {path}, line {line_at(pos)}"
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc.args[0]})") from None
        if not isinstance(obj, dict) or "conversations" not in obj:
            raise DatasetError(
                f"{where}: field 'conversations' is missing; a ShareGPT entry is "
                '{"id": "...", "conversations": [{"from": "human", "value": "..."}, ...]}'
            )
        entry = _conversation(where, obj)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)
        pos = _skip_space(text, end)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "]":
            raise DatasetError(
                f"dataset {path}, line {line_at(min(pos, len(text)))}: expected ',' or ']' "
                "between conversations"
            )
    return entries, skipped


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
