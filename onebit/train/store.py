"""A directory of distilled answers, written shard by shard, so that distilling can stop at a
time budget and resume where it stopped.

Millions of answer tokens take an hour and more to distil on two cores, longer than one
sitting may want to give; a `Store` keeps what is done. Its layout:

    manifest.json      what the answers are of: the base's sha256, the taps, the longest
                       answer, the shard size, and the sha256 of the prompt lists
    prompts.json       the training and held-out prompts, in order
    spent.json         the seconds distilling has taken so far, over every run
    held.npz           the held-out prompts' sequences (distilled first: every fit needs them)
    shard-00000.npz    training prompts 0 .. size-1, then 1, 2, ... (data.save_sequences)

A shard is written whole to a temporary name and renamed into place, so a run killed halfway
leaves only whole shards; opening a store with anything else than its manifest says (another
base, other prompts) is refused by name rather than mixing answers of two recipes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from pathlib import Path

from onebit.train import data

MANIFEST = "manifest.json"
PROMPTS = "prompts.json"
HELD = "held.npz"
SPENT = "spent.json"
#: the manifest's format; a store of another version is refused
VERSION = 1
#: prompts.json may not be larger than this (it is read whole)
MAX_PROMPTS_BYTES = 64 << 20


class StoreError(ValueError):
    """A store directory that does not hold what it is opened for, or is damaged: names the
    directory and the field or file."""


def prompts_sha256(training: Seq[str], held: Seq[str]) -> str:
    body = json.dumps({"training": list(training), "held": list(held)}, ensure_ascii=True)
    return hashlib.sha256(body.encode()).hexdigest()


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.npz"


@dataclass
class Store:
    """An opened store (`Store.open`)."""

    path: Path
    manifest: dict
    training: list[str]
    held: list[str]

    @classmethod
    def open(cls, path: str | os.PathLike, *, base_sha256: str, taps: Seq[int], max_tokens: int,
             training: Seq[str], held: Seq[str], shard: int = 128) -> Store:
        """Open the store at `path` for these answers, making it if it does not exist; a store
        made for anything else (another base, taps, answer length, shard size or prompts) is
        refused with StoreError naming what differs."""
        if isinstance(shard, bool) or not isinstance(shard, int) or shard < 1:
            raise ValueError(f"shard must be an integer >= 1, got {shard!r}")
        if not training or not held:
            raise ValueError("a store needs training and held-out prompts")
        path = Path(path)
        want = {"version": VERSION, "base_sha256": base_sha256, "taps": [int(t) for t in taps],
                "max_tokens": int(max_tokens), "shard": shard,
                "prompts_sha256": prompts_sha256(training, held),
                "training_prompts": len(training), "held_prompts": len(held)}
        manifest_path = path / MANIFEST
        if manifest_path.exists():
            have = _read_json(manifest_path, path, 1 << 20)
            if not isinstance(have, dict):
                raise StoreError(f"{manifest_path}: not a JSON object")
            for key, value in want.items():
                if have.get(key) != value:
                    raise StoreError(
                        f"{path} holds answers made with {key} = {have.get(key)!r}; this run "
                        f"asks for {value!r}: resume with the recipe that made it, or give "
                        f"another directory")
        else:
            path.mkdir(parents=True, exist_ok=True)
            _write_atomic(path / PROMPTS, json.dumps({"training": list(training),
                                                      "held": list(held)}).encode())
            _write_atomic(manifest_path, json.dumps(want, indent=1).encode())
        return cls(path, want, list(training), list(held))

    @property
    def shard_size(self) -> int:
        return int(self.manifest["shard"])

    @property
    def shard_count(self) -> int:
        """Shards the training prompts make when all are distilled."""
        return -(-len(self.training) // self.shard_size)

    def shards_done(self) -> int:
        """How many shards, from the first, are on disk (a gap ends the count: the next run
        distils from there)."""
        n = 0
        while n < self.shard_count and (self.path / shard_name(n)).exists():
            n += 1
        return n

    def prompts_done(self) -> int:
        return min(self.shards_done() * self.shard_size, len(self.training))

    def has_held(self) -> bool:
        return (self.path / HELD).exists()

    def spent(self) -> float:
        """Seconds spent distilling into this store, over every run (0 for a new one)."""
        file = self.path / SPENT
        if not file.exists():
            return 0.0
        body = _read_json(file, self.path, 1 << 16)
        seconds = body.get("distil") if isinstance(body, dict) else None
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise StoreError(f"{file}: 'distil' must be a number of seconds >= 0")
        return float(seconds)

    def _add_spent(self, seconds: float) -> None:
        _write_atomic(self.path / SPENT,
                      json.dumps({"distil": self.spent() + seconds}).encode())

    def distil(self, model, *, deadline: float | None = None, at_once: int = 8,
               most: int | None = None,
               on_shard: Callable[[int, int, int, float], None] | None = None) -> int:
        """Distil the held-out prompts (if not yet) and then the training prompts shard by
        shard, from the first missing shard, until all are done, `most` shards are on disk,
        or the next shard would end past `deadline` (a `time.monotonic()` value; judged by the
        last shard's time). Returns the shards on disk. `on_shard(index, shards, answer
        tokens, seconds)` after each."""
        taps = tuple(self.manifest["taps"])
        max_tokens = int(self.manifest["max_tokens"])
        if not self.has_held():
            start = time.monotonic()
            seqs = data.distil(model, self.held, max_tokens=max_tokens, taps=taps,
                               at_once=at_once)
            _save_atomic(self.path / HELD, seqs)
            self._add_spent(time.monotonic() - start)
        last = 0.0
        index = self.shards_done()
        last_shard = self.shard_count if most is None else min(self.shard_count, most)
        while index < last_shard:
            if deadline is not None and time.monotonic() + last > deadline:
                break
            start = time.monotonic()
            lo = index * self.shard_size
            prompts = self.training[lo: lo + self.shard_size]
            seqs = data.distil(model, prompts, max_tokens=max_tokens, taps=taps,
                               at_once=at_once)
            _save_atomic(self.path / shard_name(index), seqs)
            last = time.monotonic() - start
            self._add_spent(last)
            if on_shard is not None:
                on_shard(index, self.shard_count,
                         sum(len(s) - s.answer_start for s in seqs), last)
            index += 1
        return self.shards_done()

    def held_sequences(self, *, vocab_size: int, hidden_size: int) -> list[data.Sequence]:
        if not self.has_held():
            raise StoreError(f"{self.path}: the held-out answers are not distilled yet")
        return data.load_sequences(self.path / HELD, vocab_size=vocab_size,
                                   hidden_size=hidden_size)

    def training_sequences(self, *, vocab_size: int, hidden_size: int,
                           shards: int | None = None) -> list[data.Sequence]:
        """The training sequences of the first `shards` shards on disk (default all), each
        shard checked as an untrusted file (data.load_sequences)."""
        done = self.shards_done()
        n = done if shards is None else min(shards, done)
        out: list[data.Sequence] = []
        for i in range(n):
            out.extend(data.load_sequences(self.path / shard_name(i), vocab_size=vocab_size,
                                           hidden_size=hidden_size))
        return out


def _read_json(file: Path, store: Path, most: int):
    try:
        size = file.stat().st_size
        if size > most:
            raise StoreError(f"{file}: {size} bytes, more than the {most} a store writes")
        return json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StoreError(f"{file}: not readable JSON ({e})") from e


def _write_atomic(path: Path, body: bytes) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(body)
    os.replace(tmp, path)


def _save_atomic(path: Path, sequences: Seq[data.Sequence]) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as f:
        data.save_sequences(f, sequences)
    os.replace(tmp, path)


def load_prompts(path: str | os.PathLike) -> tuple[list[str], list[str]]:
    """The training and held-out prompts a store was made with (its prompts.json), checked:
    lists of strings whose sha256 is the manifest's."""
    path = Path(path)
    manifest = _read_json(path / MANIFEST, path, 1 << 20)
    body = _read_json(path / PROMPTS, path, MAX_PROMPTS_BYTES)
    if not (isinstance(body, dict) and isinstance(manifest, dict)):
        raise StoreError(f"{path}: manifest.json and prompts.json must be JSON objects")
    training, held = body.get("training"), body.get("held")
    if not (isinstance(training, list) and isinstance(held, list)
            and all(isinstance(p, str) for p in training + held)):
        raise StoreError(f"{path / PROMPTS}: 'training' and 'held' must be lists of strings")
    if prompts_sha256(training, held) != manifest.get("prompts_sha256"):
        raise StoreError(f"{path / PROMPTS}: its sha256 is not the manifest's")
    return training, held

