"""`train_head`: the whole recipe, from a base file to a head directory under
`$ONEBIT_HOME/heads/`: distil, choose the draft vocabulary, fit, measure, save.

1. The base answers `prompts` training prompts, `word_prompts` prompts around words of its
   own vocabulary (`prompts.word_prompts`: a new subject each) and `held_out` of the
   held-out ones (`prompts.HELD_OUT`, written apart from the training forms and subjects)
   greedily (onebit.train.data.distil).
2. The draft vocabulary is the `draft_vocab` tokens the base uses most in the training answers.
3. The head is fitted (onebit.train.fit) for `epochs` epochs, seeded, on torch's CPU threads.
4. Acceptance on the held-out answers, per chain position, is measured with the head's greedy
   chain fed its own drafts, and written into config.json with how the head was made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onebit.heads.eagle import (
    EagleConfig,
    cached_head_dir,
    default_taps,
    file_sha256,
    save_eagle,
)
from onebit.train import data, fit, store
from onebit.train.prompts import (
    HELD_OUT,
    chat_prompts,
    interleave,
    vocabulary_words,
    word_prompts,
)


@dataclass
class Recipe:
    """What `train_head` does; the defaults took 10 min 32 s on the development box's two
    cores (docs/heads.md): 880 prompts, where 352 held out 3 points less acceptance."""

    prompts: int = 880
    # prompts around words of the base's vocabulary (prompts.py): 440 of them held out 0.6
    # points more at the first draft, moved nothing measurable in the loop, and cost 7
    # minutes more (docs/heads.md), so they are asked for, not the default
    word_prompts: int = 0
    held_out: int = 32
    max_tokens: int = 160
    draft_vocab: int = 8192
    intermediate: int = 1024
    epochs: int = 6
    batch: int = 256
    lr: float = 2e-3
    seed: int = 0
    threads: int = 2
    # matrix products in bfloat16 (torch's CPU autocast; the weights stay float32): 1.8x the
    # samples a second on an AVX-512-BF16 CPU, measured on the development box
    bf16: bool = True
    # the whole run's wall-clock seconds (None: no limit); distilling may take `distil_share`
    # of it, the fit what is left (both stop early when their work is done)
    budget: float | None = None
    distil_share: float = 0.6
    # training prompts per shard of the distilled answers (onebit.train.store)
    shard: int = 128
    # the most shards trained on (None: every prompt): a recipe that names its data exactly,
    # where a budget stops wherever the machine's speed puts it
    max_shards: int | None = None

    def check(self) -> None:
        for name in ("prompts", "max_tokens", "draft_vocab", "intermediate", "epochs", "batch",
                     "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if (isinstance(self.held_out, bool) or not isinstance(self.held_out, int)
                or not 1 <= self.held_out <= len(HELD_OUT)):
            raise ValueError(f"held_out must be in [1, {len(HELD_OUT)}] (the held-out prompts), "
                             f"got {self.held_out!r}")
        if (isinstance(self.word_prompts, bool) or not isinstance(self.word_prompts, int)
                or self.word_prompts < 0):
            raise ValueError(f"word_prompts must be an integer >= 0, got {self.word_prompts!r}")
        if self.prompts > len(chat_prompts()):
            raise ValueError(f"prompts is {self.prompts}; the prompt set holds "
                             f"{len(chat_prompts())}")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be in (0, 1), got {self.lr!r}")
        if self.budget is not None and not (isinstance(self.budget, int | float)
                                            and not isinstance(self.budget, bool)
                                            and 0 < self.budget < 1e7):
            raise ValueError(f"budget must be a number of seconds in (0, 1e7), got "
                             f"{self.budget!r}")
        if not 0 < self.distil_share < 1:
            raise ValueError(f"distil_share must be in (0, 1), got {self.distil_share!r}")
        if isinstance(self.shard, bool) or not isinstance(self.shard, int) or self.shard < 1:
            raise ValueError(f"shard must be an integer >= 1, got {self.shard!r}")
        if self.max_shards is not None and (isinstance(self.max_shards, bool)
                                            or not isinstance(self.max_shards, int)
                                            or self.max_shards < 1):
            raise ValueError(f"max_shards must be an integer >= 1, got {self.max_shards!r}")


def training_prompts(recipe: Recipe, words: list[str]) -> list[str]:
    """The recipe's training prompts: its crossed chat prompts and word prompts interleaved
    (prompts.interleave), so a run its budget cuts short has both kinds."""
    return interleave(chat_prompts(recipe.seed)[: recipe.prompts],
                      word_prompts(words, recipe.word_prompts, recipe.seed))


@dataclass
class Trained:
    path: Path
    report: fit.FitReport
    coverage: float
    answer_tokens: int
    seconds: dict[str, float]


def head_tensors(head, d2t: np.ndarray) -> dict[str, np.ndarray]:
    """The fitted torch head's tensors, as `onebit.heads.eagle` stores them."""
    state = {k: v.detach().numpy().astype(np.float32) for k, v in head.state_dict().items()}
    return {"fuse.weight": state["fuse.weight"], "into.weight": state["into.weight"],
            "gate.weight": state["gate.weight"], "up.weight": state["up.weight"],
            "down.weight": state["down.weight"], "out_norm": state["out_norm"],
            "d2t": np.asarray(d2t, np.int64)}


@dataclass
class Fitted:
    """A head fitted by `fit_head`, with its draft vocabulary and what was measured."""

    head: object  # the torch head (fit.torch_head), its `d2t` set
    d2t: np.ndarray
    report: fit.FitReport
    coverage: float  # the share of the held-out answers' tokens the draft vocabulary holds
    seconds: float  # the fit's wall time


def fit_head(model, train_s, held_s, recipe: Recipe, *, d2t: np.ndarray | None = None,
             progress=None, checkpoint: str | Path | None = None,
             deadline: float | None = None, release: bool = False) -> Fitted:
    """Steps 2 to 4 of the recipe on sequences already distilled (`data.distil`): the draft
    vocabulary (`d2t`, by default chosen from `train_s`), a head fitted to `train_s`, its
    acceptance on `held_s`. `checkpoint` and `deadline` as `fit.fit` takes them; `release`
    empties the lists `train_s` and `held_s` once the samples hold their rows, so millions of
    positions are not held twice."""
    import torch

    recipe.check()
    torch.set_num_threads(recipe.threads)
    if d2t is None:
        d2t = data.draft_vocabulary(train_s, min(recipe.draft_vocab, model.vocab_size),
                                    model.vocab_size)
    cover = data.coverage(held_s, d2t)
    lm_rows = np.asarray(model.weights.get(model.weights.lm_head_name())[d2t], np.float32)
    # the output norm starts as the base's final norm weight: final_norm(1) = w / sqrt(1 + eps)
    eps = float(model.config.rms_norm_eps)
    ones = np.ones((1, model.hidden_size), np.float32)
    out_norm = np.asarray(model.final_norm(ones)[0] * np.sqrt(1.0 + eps), np.float32)
    train = fit.samples_of(train_s, d2t, model.vocab_size)
    held = fit.samples_of(held_s, d2t, model.vocab_size)
    if release:  # the samples hold every row once; the sequences' copies are gigabytes
        train_s.clear()
        held_s.clear()
    # the base's embedding rows of every token a chain can read, gathered once: the inputs
    # and anything the head can draft
    used = np.unique(np.concatenate([train.inputs.ravel(), held.inputs.ravel(), d2t]))
    where = np.full(model.vocab_size, -1, np.int64)
    where[used] = np.arange(len(used))
    table = np.stack([np.asarray(model.embed_row(int(t)), np.float32) for t in used])

    def embed(ids: np.ndarray) -> np.ndarray:
        return table[where[np.asarray(ids)]]

    head = fit.torch_head(model.hidden_size, recipe.intermediate, lm_rows, out_norm,
                          eps=model.config.rms_norm_eps, seed=recipe.seed)
    head.d2t = d2t
    steps = recipe.epochs * -(-len(train) // recipe.batch)
    bar = progress("fit", steps) if progress else None
    start = time.perf_counter()

    def on_batch(done: int, total: int, loss: float) -> None:
        if bar is not None:
            bar.total = total  # a deadline may shorten the fit
            bar.advance(done - bar.done, f"loss {loss:.2f}")

    report = fit.fit(head, train, held, embed, epochs=recipe.epochs, batch=recipe.batch,
                     lr=recipe.lr, seed=recipe.seed, on_batch=on_batch, bf16=recipe.bf16,
                     checkpoint=checkpoint, deadline=deadline)
    if bar:
        bar.close()
    return Fitted(head, d2t, report, cover, time.perf_counter() - start)


def work_dir(base_path: str | Path, training: list[str], held: list[str]) -> Path:
    """Where a run keeps its distilled answers and its fit's checkpoint by default: named by
    the base file, its sha256 and its prompts', so running the same command again resumes it
    and another recipe never finds it."""
    from onebit.hub import onebit_home

    tag = store.prompts_sha256(training, held)[:12]
    return onebit_home() / "train" / f"{Path(base_path).name}-{file_sha256(base_path)[:16]}-{tag}"


def train_head(model, base_path: str | Path, recipe: Recipe, *, out: str | Path | None = None,
               work: str | Path | None = None, say: Callable[[str], None] = print,
               progress=None, dtype=np.float32) -> Trained:
    """Train a head for `model` (loaded from `base_path`) by `recipe`; save it to `out`
    (default: `cached_head_dir(base_path)`). `progress(label, total)` makes a bar with
    `advance(n, note)` / `close()` (onebit.progress.Progress). `dtype`: how the weights are
    stored (float32, or float16 for half the file).

    The distilled answers go shard by shard to `work` (default `work_dir`), and the fit's
    checkpoint beside them: a run stopped by its budget, killed, or interrupted resumes from
    there when run again with the same recipe. `recipe.budget` is the whole head's time, over
    every run of the same work directory: distilling stops once it has had `distil_share` of
    it (counting what earlier runs spent), and the fit is shortened to end in time."""
    import torch

    recipe.check()
    torch.set_num_threads(recipe.threads)
    seconds: dict[str, float] = {}
    clock0 = time.monotonic()
    deadline = clock0 + recipe.budget if recipe.budget is not None else None
    words = vocabulary_words(model.tokenizer.decode, model.vocab_size) if recipe.word_prompts \
        else []
    training = training_prompts(recipe, words)
    held = HELD_OUT[: recipe.held_out]
    taps = default_taps(model.layer_count)
    base_sha = file_sha256(base_path)
    work = Path(work) if work is not None else work_dir(base_path, training, held)
    kept = store.Store.open(work, base_sha256=base_sha, taps=taps, max_tokens=recipe.max_tokens,
                            training=training, held=held, shard=recipe.shard)
    before = kept.shards_done()
    if before:
        say(f"resuming {work}: {kept.prompts_done()} of {len(training)} prompts distilled")
    bar = progress("distil", kept.shard_count) if progress else None
    if bar:
        bar.advance(before)
    tokens = [0]

    def on_shard(index: int, count: int, answer_tokens: int, took: float) -> None:
        tokens[0] += answer_tokens
        if bar:
            bar.advance(1, f"{answer_tokens / took:.0f} tokens/s")

    earlier = kept.spent()
    shards = kept.distil(model, at_once=8, on_shard=on_shard, most=recipe.max_shards,
                         deadline=None if deadline is None
                         else clock0 + recipe.budget * recipe.distil_share - earlier)
    if bar:
        bar.close()
    if shards == 0:
        raise RuntimeError(f"the budget of {recipe.budget:.0f} s ended before one shard of "
                           f"{recipe.shard} prompts was distilled; give more time or --shard "
                           f"fewer")
    if recipe.max_shards is not None:
        shards = min(shards, recipe.max_shards)
    seconds["distil"] = kept.spent()
    if deadline is not None:  # what earlier runs distilled is paid for out of this budget
        deadline -= earlier
    train_s = kept.training_sequences(vocab_size=model.vocab_size,
                                      hidden_size=model.hidden_size, shards=shards)
    held_s = kept.held_sequences(vocab_size=model.vocab_size, hidden_size=model.hidden_size)
    answer_tokens = sum(len(s) - s.answer_start for s in train_s + held_s)
    d2t = data.draft_vocabulary(train_s, min(recipe.draft_vocab, model.vocab_size),
                                model.vocab_size)
    say(f"distilled {answer_tokens} answer tokens from "
        f"{min(shards * recipe.shard, len(training))} training and "
        f"{len(held)} held-out prompts in {seconds['distil']:.0f} s; the draft "
        f"vocabulary of {len(d2t)} holds {data.coverage(held_s, d2t):.1%} of the held-out "
        f"answers")
    checkpoint = _fit_checkpoint(work, recipe, shards, d2t, say)
    fitted = fit_head(model, train_s, held_s, recipe, d2t=d2t, progress=progress,
                      checkpoint=checkpoint, deadline=deadline, release=True)
    head, report, cover = fitted.head, fitted.report, fitted.coverage
    seconds["fit"] = report.seconds
    seconds["total"] = seconds["distil"] + seconds["fit"]
    config = EagleConfig(
        hidden_size=model.hidden_size, intermediate_size=recipe.intermediate,
        draft_vocab_size=len(d2t), vocab_size=model.vocab_size, layer_count=model.layer_count,
        taps=taps, rms_norm_eps=float(model.config.rms_norm_eps),
        base_file=Path(base_path).name, base_sha256=base_sha,
        max_chain=fit.CHAIN,
        trained={"recipe": {k: getattr(recipe, k) for k in recipe.__dataclass_fields__},
                 "training_prompts": min(shards * recipe.shard, len(training)),
                 "answer_tokens": answer_tokens, "train_samples": report.trained,
                 "held_out_samples": report.held_out, "draft_vocab_coverage": cover,
                 "acceptance_conditional": report.conditional,
                 "acceptance_cumulative": report.cumulative,
                 "epoch_losses": report.epochs, "seconds": seconds})
    path = save_eagle(out if out is not None else cached_head_dir(base_path), config,
                      head_tensors(head, d2t), dtype=dtype)
    return Trained(path, report, cover, answer_tokens, seconds)


def _fit_checkpoint(work: Path, recipe: Recipe, shards: int, d2t: np.ndarray, say) -> Path:
    """The fit's checkpoint file in `work`, kept only if it was made by this fit: the same
    shards, draft vocabulary and fitting settings (fit.json says which); otherwise removed, so
    a fit on more answers starts afresh."""
    import hashlib
    import json

    key = {"shards": shards, "d2t_sha256": hashlib.sha256(d2t.tobytes()).hexdigest(),
           **{k: getattr(recipe, k) for k in ("intermediate", "epochs", "batch", "lr", "seed",
                                               "bf16")}}
    checkpoint, meta = work / "fit.pt", work / "fit.json"
    try:
        same = json.loads(meta.read_text()) == key
    except (OSError, ValueError):
        same = False
    if same and checkpoint.exists():
        say(f"resuming the fit from {checkpoint}")
    else:
        checkpoint.unlink(missing_ok=True)
        meta.write_text(json.dumps(key))
    return checkpoint
