"""Training a draft head (`onebit.train`): the samples line up with what drafting reads, the draft
vocabulary is the most used tokens, fitting learns, and what is saved drafts in the engine as it
did in torch. On a fabricated target (no tokenizer needed: the data is made from token ids)."""

from __future__ import annotations

import numpy as np
import pytest
from peer_modules import lazy

import onebit
from onebit.heads.eagle import EagleConfig, EagleHead, load_eagle
from onebit.models import fabricate_model, load_model
from onebit.train import data, fit

torch = lazy("torch")


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return load_model(fabricate_model(tmp_path_factory.mktemp("qwen3"), "qwen3",
                                      quantized=False))


def greedy_sequence(target, prompt, n, taps):
    result = onebit.greedy(target, prompt, max_tokens=n)
    return data.sequence_of(target, list(prompt) + list(result.tokens), len(prompt), taps)


def test_samples_line_up_with_what_drafting_reads():
    """Sample t reads the rows at t; chain step j reads token t + 1 + j and targets token
    t + 2 + j and the base's scores at t + 1 + j; steps past the end are not real."""
    tokens = np.arange(10, 20)
    t_count = len(tokens)
    feats = np.arange(t_count, dtype=np.float16)[:, None, None] * np.ones((1, 3, 4), np.float16)
    top_ids = np.tile(np.arange(data.TOP, dtype=np.int32), (t_count, 1))
    top_ids[:, 0] = tokens[np.minimum(np.arange(t_count) + 1, t_count - 1)]
    top_logits = np.zeros((t_count, data.TOP), np.float32) + np.arange(t_count)[:, None]
    seq = data.Sequence(tokens, 4, feats, top_ids, top_logits)
    d2t = np.arange(64)
    s = fit.samples_of([seq], d2t, 64)
    first = 3  # the last prompt token
    assert len(s) == t_count - 2 - first
    assert s.feats([0])[0, 0, 0] == first and s.features.shape[0] == t_count  # kept once
    assert list(s.inputs[0]) == [14, 15, 16, 17]
    assert list(s.targets[0]) == [15, 16, 17, 18]
    last = len(s) - 1  # t = 7: only step 0 is real (its target, token 9, is the last)
    assert list(s.real[last]) == [True, False, False, False]
    assert list(s.targets[last]) == [19, fit.IGNORE, fit.IGNORE, fit.IGNORE]
    assert list(s.inputs[last][:1]) == [18]
    assert s.soft_logits[0, 2, 0] == first + 1 + 2  # the base's scores at t + 1 + j
    assert (s.soft_ids[last, 1:] == -1).all()


def test_draft_vocabulary_is_the_most_used_answer_tokens():
    """The d2t map holds the `size` tokens the answers use most (prompt tokens do not count;
    ties go to the lower id), sorted by id, and coverage counts answer tokens inside it."""
    z = np.zeros((1, 3, 2), np.float16)

    def seq(tokens, start):
        n = len(tokens)
        return data.Sequence(np.asarray(tokens), start, np.repeat(z, n, 0),
                             np.zeros((n, data.TOP), np.int32),
                             np.zeros((n, data.TOP), np.float32))

    seqs = [seq([1, 1, 1, 1, 7, 7, 5, 9], 4), seq([2, 9, 9, 5], 1)]
    d2t = data.draft_vocabulary(seqs, 2, 16)
    assert list(d2t) == [5, 9]  # 9 three times, then 5 and 7 twice: 5 wins the tie
    assert data.coverage(seqs, d2t) == pytest.approx(5 / 7)
    with pytest.raises(ValueError, match="draft vocabulary size"):
        data.draft_vocabulary(seqs, 0, 16)


@pytest.mark.slow  # torch's first optimiser step and ten epochs: half a minute on two cores
def test_fitting_learns_and_the_saved_head_drafts_as_it_did_in_torch(target, tmp_path):
    """A head fitted on the target's greedy answers gets most first drafts right on them
    (an unfitted one almost none), and the engine's head loaded from what was saved, with
    float products, drafts the same tokens as the torch chain on the same rows."""
    from onebit.heads.eagle import default_taps, save_eagle
    from onebit.train.recipe import head_tensors

    taps = default_taps(target.layer_count)
    seqs = [greedy_sequence(target, [3 + i, 50 + i, 7], 24, taps) for i in range(6)]
    d2t = data.draft_vocabulary(seqs, 128, target.vocab_size)
    samples = fit.samples_of(seqs, d2t, target.vocab_size)
    lm = np.asarray(target.weights.get(target.weights.lm_head_name())[d2t], np.float32)
    ones = np.ones((1, target.hidden_size), np.float32)
    out_norm = np.asarray(target.final_norm(ones)[0] * np.sqrt(1 + target.config.rms_norm_eps),
                          np.float32)

    def embed(ids):
        return np.stack([np.asarray(target.embed_row(int(t)), np.float32) for t in ids])

    head = fit.torch_head(target.hidden_size, 64, lm, out_norm,
                          eps=target.config.rms_norm_eps, seed=0)
    head.d2t = d2t
    before = fit.chain_hits(head, samples.feats(np.arange(len(samples))), samples.inputs,
                            samples.targets, samples.real, embed)[:, 0].mean()
    report = fit.fit(head, samples, samples, embed, epochs=10, batch=32, lr=3e-3)
    assert report.epochs[-1] < report.epochs[0]
    assert report.cumulative[0] > 0.7 > before + 0.4

    config = EagleConfig(target.hidden_size, 64, len(d2t), target.vocab_size,
                         target.layer_count, taps, float(target.config.rms_norm_eps),
                         "fabricated", "0" * 64)
    path = save_eagle(tmp_path / "h", config, head_tensors(head, d2t))
    engine = EagleHead(*load_eagle(path), target, quantise=False)
    s = seqs[0]
    t = s.answer_start - 1
    target.reset()
    engine.reset()
    prefix = [int(x) for x in s.tokens[: t + 1]]
    target.verify(prefix, 0)
    target.commit_verify(len(prefix))
    engine.commit_rows(prefix, target.last_hidden_rows(), len(prefix))
    drafted = engine.propose(int(s.tokens[t + 1]), t + 1, 3, None)
    index = 0  # sample 0 of sequence 0 is position t
    f = samples.feats([index])
    u = head.fused(torch.tensor(f.astype(np.float32)))
    tok, chain = samples.inputs[index: index + 1, 0], []
    with torch.no_grad():
        for _ in range(3):
            g = head.advance(u, torch.tensor(embed(tok)))
            pick = int(head.logits(g).argmax(-1)[0])
            chain.append(int(d2t[pick]))
            u, tok = g, np.array([d2t[pick]])
    assert drafted == chain


def test_word_prompts_bring_a_new_subject_each():
    """The prompts around the base's vocabulary: whole lowercase words the tokenizer spells
    as one token after a space, each prompt a different word, the forms in turn, the same
    list for the same seed and another for another seed; past one round every word comes
    back in another form, each (word, form) pair at most once; asking for more than the
    words and forms give is refused by number."""
    from onebit.train.prompts import WORD_FORMS, vocabulary_words, word_prompts

    vocab = {1000 + i: w for i, w in enumerate([" apple", " Bread", " cat", " garden", " 12345",
                                                " sunshine", "river", " lighthouse"])}
    words = vocabulary_words(lambda ids: vocab.get(ids[0], " x"), 1008)
    assert words == ["apple", "garden", "sunshine", "lighthouse"]
    made = word_prompts(words, 4, seed=0)
    used = [next(w for w in words if w in p) for p in made]
    assert sorted(used) == sorted(words)  # a different word each
    assert [p.replace(w, "{}") for p, w in zip(made, used, strict=True)] == WORD_FORMS[:4]
    assert word_prompts(words, 4, seed=0) == made
    assert word_prompts(words, 4, seed=1) != made
    every = word_prompts(words, 4 * len(WORD_FORMS), seed=0)
    assert len(set(every)) == len(every)  # each word in every form once
    assert every[:4] == made and sorted(every[4:8]) != sorted(made)
    assert all(sum(w in p for p in every) == len(WORD_FORMS) for w in words)
    with pytest.raises(ValueError, match=f"{4 * len(WORD_FORMS) + 1} word prompts"):
        word_prompts(words, 4 * len(WORD_FORMS) + 1)


def _sequences(vocab: int = 64, hidden: int = 4):
    rng = np.random.default_rng(0)
    out = []
    for n, start in ((7, 3), (5, 1), (9, 8)):
        out.append(data.Sequence(rng.integers(0, vocab, n), start,
                                 rng.standard_normal((n, 3, hidden)).astype(np.float16),
                                 rng.integers(0, vocab, (n, data.TOP)).astype(np.int32),
                                 rng.standard_normal((n, data.TOP)).astype(np.float32)))
    return out


def test_saved_sequences_read_back_as_they_were(tmp_path):
    """`save_sequences` then `load_sequences` gives every sequence back, array for array and
    answer start for answer start, in order (what head_scaling.py fits on again)."""
    seqs = _sequences()
    data.save_sequences(tmp_path / "a.npz", seqs)
    back = data.load_sequences(tmp_path / "a.npz", vocab_size=64, hidden_size=4)
    assert len(back) == len(seqs)
    for a, b in zip(seqs, back, strict=True):
        assert a.answer_start == b.answer_start
        for name in ("tokens", "features", "top_ids", "top_logits"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
            assert getattr(a, name).dtype == getattr(b, name).dtype, name


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    arrays.update(changes)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})


@pytest.mark.parametrize("changes, message", [
    ({"lengths": None}, "no 'lengths' array"),
    ({"tokens": np.arange(21, dtype=np.int32)}, "'tokens' is int32"),
    ({"lengths": np.array([7, 5, 8])}, "must add up to the 21 tokens"),
    ({"answer_starts": np.array([3, 5, 8])}, "answer start lies outside"),
    ({"answer_starts": np.array([0, 1, 8])}, "answer start lies outside"),
    ({"tokens": np.full(21, 64)}, "outside the base's vocabulary of 64"),
    ({"features": np.zeros((21, 3, 5), np.float16)}, r"'features' has shape \(21, 3, 5\)"),
    ({"top_ids": np.zeros((21, 3), np.int32)}, "'top_ids' has shape"),
])
def test_a_damaged_sequences_file_is_refused_by_name(tmp_path, changes, message):
    """A sequences file is untrusted: a missing array, a wrong dtype, lengths that do not add
    up, an answer start outside its sequence, a token outside the vocabulary or a feature
    width that is not the base's each raise SequenceFileError naming the file and the fault."""
    path = tmp_path / "a.npz"
    data.save_sequences(path, _sequences())
    _rewrite(path, **changes)
    with pytest.raises(data.SequenceFileError, match=message) as e:
        data.load_sequences(path, vocab_size=64, hidden_size=4)
    assert str(path) in str(e.value)


def test_a_sequences_file_that_claims_too_much_or_carries_pickles_is_refused(tmp_path):
    """An array header claiming more bytes than the file holds is refused before NumPy
    allocates what it claims; a compressed member, a pickled object array and a file that is
    not a zip archive are refused too, each as SequenceFileError."""
    import zipfile

    path = tmp_path / "a.npz"
    data.save_sequences(path, _sequences())
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    header = np.lib.format.header_data_from_array_1_0(np.zeros(21, np.int64))
    header["shape"] = (10**15,)
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w") as z:
        for name, raw in members.items():
            if name == "tokens.npy":
                import io
                buf = io.BytesIO()
                np.lib.format.write_array_header_1_0(buf, header)
                raw = buf.getvalue() + raw[-21 * 8:]
            z.writestr(name, raw)
    with pytest.raises(data.SequenceFileError, match="claims shape"):
        data.load_sequences(huge, vocab_size=64, hidden_size=4)

    packed = tmp_path / "packed.npz"
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    with pytest.raises(data.SequenceFileError, match="compressed"):
        data.load_sequences(packed, vocab_size=64, hidden_size=4)

    pickled = tmp_path / "pickled.npz"
    _rewrite(path, tokens=np.array([object()] * 21, dtype=object))
    path.rename(pickled)
    with pytest.raises(data.SequenceFileError):
        data.load_sequences(pickled, vocab_size=64, hidden_size=4)

    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(data.SequenceFileError, match="not a sequences file"):
        data.load_sequences(junk, vocab_size=64, hidden_size=4)
