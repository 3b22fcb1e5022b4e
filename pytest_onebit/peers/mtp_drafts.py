"""A target with its own MTP head for llama-server's `--spec-type draft-mtp`, fabricated here
with the `gguf` package (docs/peers.md, "The MTP, DFlash and DSpark arms").

llama-server's MTP path reads the multi-token-prediction block from the target's own GGUF (the
`blk.<n>.nextn.*` tensors of the last `<arch>.nextn_predict_layers` blocks) and only for the
architectures whose loader builds an MTP graph; `llama` (SmolLM2's) is not one of them. So
`mtp_target(vocab_source)` writes a small `glm4moe` model (the architecture llama.cpp's MTP
path was first written for): 2 dense decoder blocks of width 64 and one MTP block (2 experts,
1 used, 1 shared), with the vocabulary, merges, special ids and chat template of
`vocab_source` (SmolLM2's GGUF) copied field by field, so llama-server tokenizes and formats
chats as it does for SmolLM2. Every weight is seeded random (numpy's PCG64), shaped so that
both of llama.cpp's verify paths run:

- the trunk is mostly a bigram model: each block adds a small random attention and FFN
  contribution to the token's embedding, so the next token is usually g(current token) (a
  fixed random map, through an untied output matrix) and sometimes not;
- `head="bigram"`: the MTP block passes the next token's embedding through (eh_proj = [I | 0],
  unit norms, small attention and expert weights) into the shared output, so it proposes
  g(next token): often what the target then says, sometimes not (accept and rollback);
- `head="random"`: every MTP weight random: nearly every draft rejected;
- a few tokens (`EOS_SHARE` of the vocabulary) carry a common direction the output row of the
  end-of-turn token reads, so answers end their turn now and then (I10-eos has something to
  hold).

The file is cached under `$ONEBIT_HOME/drafts/<vocab source>-<sha256>/` by the content of what
made it (the source's sha256, the head, the seed, this module's source, the gguf package's
version), written to a temporary name and renamed into place. The same GGUF is both servers'
model: the plain server ignores the MTP block (llama.cpp skips `nextn` tensors unless MTP is
asked for), the speculative one drafts with it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

ARCH = "glm4moe"
HEADS = ("bigram", "random")
DEFAULT_SEED = 11
#: the fabricated model's shapes: width, trunk blocks, heads, kv heads, FFN, experts
DIMS = {"embd": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ff": 128, "experts": 2,
        "experts_used": 1, "ff_expert": 32, "context": 8192}
EOS_SHARE = 0.01
TRUNK_SCALE = 0.25   # the trunk's attention / FFN output relative to the embedding
HEAD_SCALE = 0.02    # the bigram MTP block's own attention / expert output
#: the fields copied from the vocabulary source (its tokenizer and chat template)
VOCAB_PREFIX = "tokenizer."


class MtpDraftError(RuntimeError):
    """The MTP target could not be made: a vocabulary source that is not a GGUF with a
    tokenizer, or a write that failed."""


def _vocab_fields(source: Path) -> tuple[list, int, int]:
    """The tokenizer fields of `source` (name, value, type, sub-type), its vocabulary size and
    its end-of-turn id."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(source))
    except (OSError, ValueError) as error:
        raise MtpDraftError(f"the vocabulary source {source} is not a readable GGUF: "
                            f"{error}") from error
    fields = []
    for field in reader.fields.values():
        if not field.name.startswith(VOCAB_PREFIX):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        fields.append((field.name, field.contents(), kind, sub))
    names = {f[0]: f[1] for f in fields}
    tokens, eos = names.get("tokenizer.ggml.tokens"), names.get("tokenizer.ggml.eos_token_id")
    if not tokens or not isinstance(eos, int):
        raise MtpDraftError(f"{source} has no tokenizer.ggml.tokens / eos_token_id to copy")
    return fields, len(tokens), eos


def _weights(vocab: int, eos: int, head: str, seed: int) -> dict[str, np.ndarray]:
    """Every tensor of the fabricated glm4moe model, numpy shapes (ggml's reversed), f32."""
    d, n = DIMS["embd"], DIMS["layers"]
    hd = d // DIMS["heads"]
    q, kv, ff = DIMS["heads"] * hd, DIMS["kv_heads"] * hd, DIMS["ff"]
    e, fe = DIMS["experts"], DIMS["ff_expert"]
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    ones = np.ones(d, np.float32)
    embd = rng.standard_normal((vocab, d)).astype(np.float32)
    common = rng.standard_normal(d).astype(np.float32)
    common /= np.linalg.norm(common)
    ending = rng.choice(vocab, size=max(1, int(EOS_SHARE * vocab)), replace=False)
    embd[ending] += 4.0 * np.sqrt(d) * common
    output = rng.standard_normal((vocab, d)).astype(np.float32)
    output[eos] = 10.0 * common
    w = {"token_embd.weight": embd, "output_norm.weight": ones.copy(), "output.weight": output}
    for i in range(n + 1):
        mtp = i == n
        scale = TRUNK_SCALE if not mtp else (HEAD_SCALE if head == "bigram" else 1.0)
        b = f"blk.{i}."
        w.update({b + "attn_norm.weight": ones.copy(), b + "attn_q.weight": mat(q, d),
                  b + "attn_k.weight": mat(kv, d), b + "attn_v.weight": mat(kv, d),
                  b + "attn_output.weight": mat(d, q, scale),
                  b + "post_attention_norm.weight": ones.copy()})
        if not mtp:
            w.update({b + "ffn_gate.weight": mat(ff, d), b + "ffn_up.weight": mat(ff, d),
                      b + "ffn_down.weight": mat(d, ff, scale)})
            continue
        w.update({b + "ffn_gate_inp.weight": mat(e, d),
                  b + "exp_probs_b.bias": np.zeros(e, np.float32),
                  b + "ffn_gate_exps.weight": np.stack([mat(fe, d) for _ in range(e)]),
                  b + "ffn_up_exps.weight": np.stack([mat(fe, d) for _ in range(e)]),
                  b + "ffn_down_exps.weight": np.stack([mat(d, fe, scale) for _ in range(e)]),
                  b + "ffn_gate_shexp.weight": mat(fe, d), b + "ffn_up_shexp.weight": mat(fe, d),
                  b + "ffn_down_shexp.weight": mat(d, fe, scale)})
        if head == "bigram":  # pass the next token's embedding through: propose g(next)
            eh = np.concatenate([np.eye(d), np.zeros((d, d))], axis=1).astype(np.float32)
            w.update({b + "nextn.eh_proj.weight": eh, b + "nextn.enorm.weight": ones.copy(),
                      b + "nextn.hnorm.weight": ones.copy()})
        else:
            w.update({b + "nextn.eh_proj.weight": mat(d, 2 * d),
                      b + "nextn.enorm.weight": rng.standard_normal(d).astype(np.float32),
                      b + "nextn.hnorm.weight": rng.standard_normal(d).astype(np.float32)})
    return w


def write_mtp_target(vocab_source: str | Path, out: str | Path, *, head: str = "bigram",
                     seed: int = DEFAULT_SEED) -> Path:
    """The fabricated glm4moe target with one MTP block, written to `out` (a temporary name
    renamed into place); the module says what it holds."""
    import gguf

    if head not in HEADS:
        raise ValueError(f"unknown MTP head {head!r}; one of {', '.join(HEADS)}")
    source, out = Path(vocab_source), Path(out)
    fields, vocab, eos = _vocab_fields(source)
    d, n = DIMS["embd"], DIMS["layers"]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    writer = gguf.GGUFWriter(str(partial), ARCH)
    try:
        writer.add_name(f"onebit fabricated glm4moe MTP target ({head} head, seed {seed})")
        u32 = {"block_count": n + 1, "nextn_predict_layers": 1, "context_length": DIMS["context"],
               "embedding_length": d, "feed_forward_length": DIMS["ff"],
               "attention.head_count": DIMS["heads"],
               "attention.head_count_kv": DIMS["kv_heads"],
               "rope.dimension_count": d // DIMS["heads"], "expert_count": DIMS["experts"],
               "expert_used_count": DIMS["experts_used"], "expert_shared_count": 1,
               "leading_dense_block_count": n, "expert_feed_forward_length": DIMS["ff_expert"],
               "expert_gating_func": 2, "vocab_size": vocab}
        for key, value in u32.items():
            writer.add_uint32(f"{ARCH}.{key}", value)
        writer.add_float32(f"{ARCH}.rope.freq_base", 10000.0)
        writer.add_float32(f"{ARCH}.attention.layer_norm_rms_epsilon", 1e-5)
        writer.add_float32(f"{ARCH}.expert_weights_scale", 1.0)
        writer.add_bool(f"{ARCH}.expert_weights_norm", True)
        for name, value, kind, sub in fields:
            writer.add_key_value(name, value, kind, sub_type=sub)
        for name, array in _weights(vocab, eos, head, seed).items():
            writer.add_tensor(name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, out)
    except (OSError, ValueError) as error:
        raise MtpDraftError(f"writing the MTP target {out}: {error}") from error
    finally:
        writer.close()
        partial.unlink(missing_ok=True)
    return out


def recipe(source_sha256: str, head: str, seed: int) -> dict:
    """What an MTP target is made from, by content: its cache key is this recipe's sha256."""
    import gguf

    try:
        from importlib.metadata import version
        gguf_version = version("gguf")
    except Exception:  # an uninstalled checkout of gguf-py has no metadata
        gguf_version = getattr(gguf, "__version__", "unknown")
    return {"vocab_source_sha256": source_sha256, "head": head, "seed": seed,
            "maker_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
            "dims": DIMS, "gguf": gguf_version}


def mtp_targets(vocab_source: str | Path, *, heads: tuple[str, ...] = HEADS,
                seed: int = DEFAULT_SEED) -> dict[str, Path]:
    """{head: the fabricated MTP target GGUF}, made once and cached by content."""
    from onebit.gguf.derive import drafts_home
    from onebit.hub import sha256_of

    source = Path(vocab_source)
    if not source.is_file():
        raise MtpDraftError(f"the vocabulary source {str(source)!r} is not a file")
    unknown = [h for h in heads if h not in HEADS]
    if unknown:
        raise ValueError(f"unknown MTP head {unknown[0]!r}; one of {', '.join(HEADS)}")
    sha = sha256_of(source)
    folder = drafts_home() / f"{source.stem}-{sha[:16]}"
    made = {}
    for head in heads:
        plan = recipe(sha, head, seed)
        key = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:16]
        name = f"mtp-glm4moe-{head}{seed}-{key}"
        out = folder / f"{name}.gguf"
        if not out.is_file():
            write_mtp_target(source, out, head=head, seed=seed)
            (folder / f"{name}.json").write_text(json.dumps(plan, indent=1, sort_keys=True))
        made[head] = out
    return made


__all__ = ["ARCH", "DEFAULT_SEED", "HEADS", "MtpDraftError", "mtp_targets", "write_mtp_target"]
