"""A trained EAGLE-style draft head: one small block over the base's own rows, chained on its own
state, scored by the base's lm_head over a reduced vocabulary.

At a round, the base has committed position t and picked t1 (the token at t + 1). The head reads
three rows the base computed at t: the outputs of a low and a middle layer (raw residual rows,
`taps`) and the final-normed hidden row (what the lm_head read to pick t1). With `n(x)` the RMS
normalisation without weight:

    u_0 = W_fuse [n(low); n(mid); high]                          (3H -> H, once a round)
    z_j = W_in [n(u_j); n(embed(x_j))]                           x_0 = t1, x_j = draft j - 1
    g_j = z_j + W_down (silu(W_gate n(z_j)) * W_up n(z_j))        (a SwiGLU block, residual)
    logits_j = lm_head[d2t] (n(g_j) * w_out)                     (the base's rows, d2t only)
    draft j = d2t[argmax logits_j];  u_{j+1} = g_j

So draft j predicts position t + 2 + j. The fusion of low, middle and high rows is EAGLE-3's;
chaining on the head's own state `g` (not the base's, which a draft does not have) is what it
trains for (training-time test, onebit.train.fit). The reduced vocabulary (`d2t`, draft index
-> base id: the tokens the base emits most in its answers, FR-Spec's idea) makes the lm_head
product a sixth of the base's or less, and it is the base's own rows through the base's own
kernel (`lm_head_subset`), so the head never learns an lm_head. Without attention the head
needs no cache of its own: what it knows of the context is what the base's rows at t carry.

The head's matrices are quantised to q8_0 at load and multiplied by the base's integer kernel
when numba is there (a draft is a guess: the base checks it, so the head needs no batch
invariance); without numba, numpy products in float32.

Files: a directory with `config.json` (kind "onebit-eagle", the sizes, the taps, the base's
file name and sha256) and `model.safetensors` (float32 tensors and `d2t`). `load_eagle` refuses
a head made for another base by name, and a damaged or hostile file with `DraftFileError`
before anything is allocated from its sizes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads.choose import SamplingDrafter
from onebit.heads.errors import DraftError, DraftFileError, DraftMismatchError
from onebit.heads.target import check_target

KIND = "onebit-eagle"
VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
#: what a head file may hold at most: far above any head for a model onebit runs, far below
#: what would hurt the machine (a hostile config's sizes are refused before any allocation)
MAX_FILE_BYTES = 1 << 30
MAX_HIDDEN = 16384
MAX_INTERMEDIATE = 65536
MAX_VOCAB = 1 << 20
MAX_CHAIN = 16
TAPS_NEED = ("vocab_size", "hidden_size", "layer_count", "embed_row", "set_layer_taps",
             "tapped_tail", "lm_head_subset")


@dataclass(frozen=True)
class EagleConfig:
    """The shape of a head and what it was made for (config.json)."""

    hidden_size: int
    intermediate_size: int
    draft_vocab_size: int
    vocab_size: int  # the base's
    layer_count: int  # the base's
    taps: tuple[int, int]  # the low and middle layers read (the high row is the final hidden)
    rms_norm_eps: float
    base_file: str  # the base's file name, for messages
    base_sha256: str
    max_chain: int = 4  # the most drafts a round asks of it (as many steps as it trained)
    trained: dict[str, Any] = field(default_factory=dict)  # how it was made, what it measured

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        h, i = self.hidden_size, self.intermediate_size
        return {"fuse.weight": (h, 3 * h), "into.weight": (h, 2 * h), "gate.weight": (i, h),
                "up.weight": (i, h), "down.weight": (h, i), "out_norm": (h,),
                "d2t": (self.draft_vocab_size,)}

    def to_json(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["taps"] = list(self.taps)
        return {"kind": KIND, "version": VERSION, **raw}


def _int_field(raw: dict, name: str, low: int, high: int, source: str) -> int:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DraftFileError(f"{source}: '{name}' is {value!r}; expected an integer in "
                             f"[{low}, {high}]")
    return value


def config_from_json(raw: object, source: str) -> EagleConfig:
    """config.json's object as an `EagleConfig`, every field checked; `DraftFileError` names
    the first bad one."""
    if not isinstance(raw, dict):
        raise DraftFileError(f"{source}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("kind") != KIND:
        raise DraftFileError(f"{source}: 'kind' is {raw.get('kind')!r}; an onebit trained head "
                             f"says {KIND!r}")
    if raw.get("version") != VERSION:
        raise DraftFileError(f"{source}: 'version' is {raw.get('version')!r}; this onebit "
                             f"reads version {VERSION}")
    h = _int_field(raw, "hidden_size", 1, MAX_HIDDEN, source)
    i = _int_field(raw, "intermediate_size", 1, MAX_INTERMEDIATE, source)
    v = _int_field(raw, "vocab_size", 1, MAX_VOCAB, source)
    d = _int_field(raw, "draft_vocab_size", 1, v, source)
    layers = _int_field(raw, "layer_count", 1, 4096, source)
    chain = _int_field(raw, "max_chain", 1, MAX_CHAIN, source)
    taps = raw.get("taps")
    if (not isinstance(taps, list) or len(taps) != 2
            or any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < layers
                   for t in taps)):
        raise DraftFileError(f"{source}: 'taps' is {taps!r}; expected two layer ids in "
                             f"[0, {layers})")
    eps = raw.get("rms_norm_eps")
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < 1:
        raise DraftFileError(f"{source}: 'rms_norm_eps' is {eps!r}; expected a number in (0, 1)")
    sha, name = raw.get("base_sha256"), raw.get("base_file")
    if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise DraftFileError(f"{source}: 'base_sha256' is {sha!r}; expected 64 hex digits")
    if not isinstance(name, str) or not name or len(name) > 255:
        raise DraftFileError(f"{source}: 'base_file' is {name!r}; expected a file name")
    trained = raw.get("trained", {})
    if not isinstance(trained, dict):
        raise DraftFileError(f"{source}: 'trained' is {type(trained).__name__}; expected an object")
    return EagleConfig(h, i, d, v, layers, (taps[0], taps[1]), float(eps), name, sha,
                       chain, trained)


def default_taps(layer_count: int) -> tuple[int, int]:
    """The low and middle layers a head taps (the high row is the final hidden): an early
    layer that still carries the token's identity (the third, or the first of a shallow
    stack), and the middle of the stack."""
    if isinstance(layer_count, bool) or not isinstance(layer_count, int) or layer_count < 1:
        raise ValueError(f"a base has at least one layer, got {layer_count!r}")
    return (min(2, max(layer_count - 3, 0)), layer_count // 2)


# ---------------------------------------------------------------------------------------------
# Files


def file_sha256(path: str | Path) -> str:
    """The sha256 of a base's file, remembered by (path, size, mtime): a head is checked
    against its base on every load, and hashing 100 MB each time would cost a third of a
    second."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    got = _SHA_CACHE.get(key)
    if got is None:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        got = _SHA_CACHE[key] = digest.hexdigest()
    return got


_SHA_CACHE: dict[tuple, str] = {}


def heads_dir() -> Path:
    """`$ONEBIT_HOME/heads`: where `onebit train-head` keeps what it trained."""
    home = os.environ.get("ONEBIT_HOME")
    root = Path(home).expanduser() if home else Path.home() / ".cache" / "onebit"
    return root / "heads"


def cached_head_dir(base_path: str | Path) -> Path:
    """Where the trained head of the base file at `base_path` lives: named by the file and
    the first 16 hex digits of its sha256, so a changed file never finds an old head."""
    return heads_dir() / f"{Path(base_path).name}-{file_sha256(base_path)[:16]}"


#: the dtypes a head's weights may be stored in (they are float32 once loaded); float16 halves
#: the file of a head shipped inside the package, and the head's products quantise to q8_0
#: anyway
WEIGHT_DTYPES = (np.float32, np.float16)


def save_eagle(path: str | Path, config: EagleConfig, tensors: dict[str, np.ndarray], *,
               dtype=np.float32) -> Path:
    """Write a head directory: config.json and model.safetensors (weights in `dtype`, float32
    or float16; d2t as int64)."""
    from safetensors.numpy import save_file

    if np.dtype(dtype) not in [np.dtype(d) for d in WEIGHT_DTYPES]:
        raise ValueError(f"a head's weights are stored as float32 or float16, not {dtype!r}")
    shapes = config.tensor_shapes()
    if set(tensors) != set(shapes):
        raise ValueError(f"a head has the tensors {sorted(shapes)}; got {sorted(tensors)}")
    out = {}
    for name, shape in shapes.items():
        value = np.asarray(tensors[name])
        if value.shape != shape:
            raise ValueError(f"tensor {name} has shape {value.shape}; the config says {shape}")
        out[name] = np.ascontiguousarray(value, np.int64 if name == "d2t" else dtype)
        if (name != "d2t" and not np.isfinite(out[name]).all()
                and np.isfinite(np.asarray(value, np.float64)).all()):  # the cast overflowed
            raise ValueError(f"tensor {name} holds values {np.dtype(dtype)} cannot hold")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (WEIGHTS_FILE + ".part")
    save_file(out, str(tmp), metadata={"format": "np"})
    os.replace(tmp, path / WEIGHTS_FILE)  # a reader never sees half a file
    (path / CONFIG_FILE).write_text(json.dumps(config.to_json(), indent=2) + "\n")
    return path


def read_head_config(path: Path, what: str) -> tuple[dict, Path]:
    """The parsed config.json of head directory `path` (`what` names the kind in the error)
    and its file; a `DraftFileError` for a missing directory, an oversized file or bad JSON."""
    from onebit.models.files import read_small

    if not path.is_dir():
        raise DraftFileError(f"{path}: not a directory ({what} is a directory with "
                             f"{CONFIG_FILE} and {WEIGHTS_FILE})")
    cfg_file = path / CONFIG_FILE
    try:
        return json.loads(read_small(cfg_file, DraftFileError)), cfg_file
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as error:
        raise DraftFileError(f"{cfg_file}: not valid JSON: {error}") from None


def load_eagle(path: str | Path) -> tuple[EagleConfig, dict[str, np.ndarray]]:
    """Read and check a head directory. Every failure is a `DraftFileError` naming the file
    and the field or tensor: sizes are checked against the config before any tensor is read,
    each tensor's dtype and shape against the config, weights must be finite, and `d2t` must
    be distinct base ids in order. Weights stored as float16 come back as float32."""

    path = Path(path)
    raw, cfg_file = read_head_config(path, "a trained head")
    config = config_from_json(raw, str(cfg_file))
    file = path / WEIGHTS_FILE
    if not file.is_file():
        raise DraftFileError(f"{file}: missing (the head's weights)")
    shapes = config.tensor_shapes()
    width = _weight_width(file)  # 2 for a float16 head, else 4
    want = sum(width * int(np.prod(s)) for n, s in shapes.items() if n != "d2t")
    want += 8 * config.draft_vocab_size
    size = file.stat().st_size
    if size > MAX_FILE_BYTES or size < want:
        raise DraftFileError(f"{file}: {size} bytes; the config's sizes need {want} bytes of "
                             f"tensors (and a head file may hold at most {MAX_FILE_BYTES})")
    tensors = _read_weights(file)
    for name in shapes:
        if name not in tensors:
            raise DraftFileError(f"{file}: missing tensor '{name}'")
    unknown = sorted(set(tensors) - set(shapes))
    if unknown:
        raise DraftFileError(f"{file}: tensor '{unknown[0]}' is not part of a trained head")
    for name, shape in shapes.items():
        value = tensors[name]
        allowed = (np.int64,) if name == "d2t" else WEIGHT_DTYPES
        if value.dtype not in [np.dtype(d) for d in allowed] or value.shape != shape:
            raise DraftFileError(f"{file}: tensor '{name}' is {value.dtype} {value.shape}; "
                                 f"expected {' or '.join(str(np.dtype(d)) for d in allowed)} "
                                 f"{shape}")
        if name != "d2t":
            if not np.isfinite(value).all():
                raise DraftFileError(f"{file}: tensor '{name}' holds non-finite values")
            tensors[name] = value.astype(np.float32)
    d2t = tensors["d2t"]
    if d2t.size and (d2t.min() < 0 or d2t.max() >= config.vocab_size
                     or (d2t.size > 1 and not (np.diff(d2t) > 0).all())):
        raise DraftFileError(f"{file}: tensor 'd2t' must hold distinct base token ids in "
                             f"increasing order, in [0, {config.vocab_size})")
    return config, tensors


def _weight_width(file: Path) -> int:
    """Bytes a weight of the head at `file` takes, from its safetensors header alone (the
    header's length is bounded before it is read): 2 when every weight is float16, else 4.
    An unreadable header counts as 4; reading the tensors names what is wrong with it."""
    try:
        with open(file, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 0 < n <= 1 << 20:
                return 4
            header = json.loads(f.read(n))
    except (OSError, ValueError, UnicodeDecodeError):
        return 4
    dtypes = {v.get("dtype") for k, v in header.items()
              if k not in ("__metadata__", "d2t") and isinstance(v, dict)}
    return 2 if dtypes == {"F16"} else 4


def _read_weights(file: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(str(file))
    except (SafetensorError, OSError, ValueError, TypeError) as error:
        raise DraftFileError(f"{file}: not a readable safetensors file: {error}") from None


def check_base(config: EagleConfig, base: object, base_path: str | Path | None) -> None:
    """Refuse a head made for another base: by its sha256 when the base's file is known, and
    always by its sizes. The message names both."""
    if base_path is not None and Path(base_path).is_file():
        sha = file_sha256(base_path)
        if sha != config.base_sha256:
            raise DraftMismatchError(
                f"this head was trained for {config.base_file} (sha256 "
                f"{config.base_sha256[:16]}..); the base is {Path(base_path).name} (sha256 "
                f"{sha[:16]}..): train one for it with `onebit train-head`")
    for what, mine, theirs in (("hidden size", config.hidden_size, base.hidden_size),
                               ("layer count", config.layer_count, base.layer_count),
                               ("vocabulary", config.vocab_size, base.vocab_size)):
        if int(theirs) != mine:
            raise DraftMismatchError(f"this head was trained for {config.base_file}, with "
                                     f"{what} {mine}; the base has {int(theirs)}")


# ---------------------------------------------------------------------------------------------
# The products


def _rms(x: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


class _Products:
    """The head's matrices as products `f(rows [R, in]) -> [R, out]`: q8_0 blocks on the
    base's integer kernel when numba is present (and the width fits its blocks), else float32
    numpy."""

    def __init__(self, tensors: dict[str, np.ndarray], quantise: bool) -> None:
        self.f: dict[str, Any] = {}
        self.blocks: dict[str, Any] = {}  # name -> q8_0 BlockWeight, where quantised
        gate_up = np.concatenate([tensors["gate.weight"], tensors["up.weight"]])
        for name, w in (("fuse", tensors["fuse.weight"]), ("into", tensors["into.weight"]),
                        ("gate_up", gate_up), ("down", tensors["down.weight"])):
            self.f[name] = self._product(name, np.ascontiguousarray(w, np.float32), quantise)

    def _product(self, name: str, w: np.ndarray, quantise: bool):
        if quantise and w.shape[1] % 32 == 0:
            try:
                from gguf import GGMLQuantizationType
                from gguf.quants import quantize

                from onebit.models import int8_kernel
                from onebit.models.blocks import BlockWeight
            except ImportError:
                pass
            else:
                block = BlockWeight.from_stored(quantize(w, GGMLQuantizationType.Q8_0), "q8_0",
                                                (int(w.shape[0]), int(w.shape[1])))
                self.blocks[name] = block
                return lambda rows: int8_kernel.block_rows(block, rows, parallel=False)
        wt = np.ascontiguousarray(w.T)
        return lambda rows: rows @ wt


def _requantised(base: object, d2t: np.ndarray, kind: str):
    """The base's lm_head rows of `d2t` quantised again to `kind` (q4_1: 0.625 bytes a weight
    where q8_0 takes 1.06): fewer bytes for the compiled chain to stream per draft, at the
    cost of drafts scored through coarser rows. The text is never at stake (the base's own
    lm_head judges every draft)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    from onebit.models.blocks import BlockWeight

    rows = np.asarray(base.weights.get(base.weights.lm_head_name())[d2t],  # type: ignore[attr-defined]
                      np.float32)
    stored = quantize(rows, GGMLQuantizationType[kind.upper()])
    return BlockWeight.from_stored(stored, kind, (int(rows.shape[0]), int(rows.shape[1])))


def has_int8_kernel() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


class EagleHead(SamplingDrafter):
    """A one-pass `DraftHead` around a trained head and its base (see the module docstring).

    Construction checks the pairing (`check_base`), asks the base to record the two tapped
    layers, and prepares the products. `commit_rows` keeps the last committed position's rows;
    `propose` fuses them once and chains up to `max_chain` drafts, recording each draft's
    probability under the head (`confidence`: the softmax at the argmax, or the drawn token's
    q when sampling) and stopping after a draft less sure than `stop_below` (default 0: never;
    `PolicyHead` sets it to what a draft needs to pay for its row).

    Greedy drafts run as one compiled call (onebit.heads.eagle_kernel) where the products are
    quantised and the base's lm_head is in int8-kernel blocks; `compiled=False` keeps the
    NumPy path, `compiled=True` refuses to build without the compiled one."""

    def __init__(self, config: EagleConfig, tensors: dict[str, np.ndarray], base: object, *,
                 base_path: str | Path | None = None, k: int | None = None,
                 quantise: bool | None = None, compiled: bool | None = None,
                 lm_kind: str | None = None) -> None:
        check_target(base, "a trained head", TAPS_NEED)
        check_base(config, base, base_path)
        self.config = config
        self.base = base
        # the float weights as loaded, kept so the head can be written out again exactly
        # (onebit.heads.speculators); the products below are built from them
        self.tensors = tensors
        self.k = config.max_chain if k is None else int(k)
        if not 1 <= self.k <= MAX_CHAIN:
            raise ValueError(f"k must be in [1, {MAX_CHAIN}], got {k!r}")
        self.eps = np.float32(config.rms_norm_eps)
        self.d2t = np.asarray(tensors["d2t"], np.int64)
        self.w_out = np.asarray(tensors["out_norm"], np.float32)
        self.products = _Products(tensors, has_int8_kernel() if quantise is None else quantise)
        self.lm = base.lm_head_subset(self.d2t)  # type: ignore[attr-defined]
        self.intermediate = config.intermediate_size
        self.stop_below = 0.0
        if lm_kind not in (None, "q4_1"):
            raise ValueError(f"lm_kind must be None (the base's own blocks) or 'q4_1', got "
                             f"{lm_kind!r}")
        self.lm_kind = lm_kind
        self.chain = self._compiled_chain(base) if compiled is not False else None
        if compiled and self.chain is None:
            raise ValueError("a compiled chain needs numba, quantised products, and a base "
                             "whose lm_head is in int8-kernel blocks with no finish_logits")
        base.set_layer_taps(list(config.taps))  # type: ignore[attr-defined]
        self.reset()

    def _compiled_chain(self, base: object):
        """The greedy chain in one compiled call (onebit.heads.eagle_kernel), where the head's
        products are q8_0 blocks and the base's lm_head rows are int8-kernel blocks; else
        None (the NumPy path drafts)."""
        if len(self.products.blocks) != 4 or not hasattr(base, "lm_head_subset_blocks"):
            return None
        from onebit.models import int8_kernel

        lm = base.lm_head_subset_blocks(self.d2t)
        # the chain builds one correction a block of 32 for its lm_head product
        if lm is None or lm.kind not in int8_kernel.PER_BLOCK_KINDS:
            return None
        if self.lm_kind is not None and lm.kind != self.lm_kind:
            lm = _requantised(base, self.d2t, self.lm_kind)
        from onebit.heads.eagle_kernel import CompiledChain

        embed = base.embed_row  # type: ignore[attr-defined]
        rows = np.stack([np.asarray(embed(int(t)), np.float32) for t in self.d2t])
        return CompiledChain(self.products.blocks, lm, rows, self.w_out, float(self.eps))

    def __repr__(self) -> str:
        c = self.config
        return (f"EagleHead(base={c.base_file}, draft_vocab={c.draft_vocab_size}, "
                f"intermediate={c.intermediate_size}, k={self.k})")

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        self.length = 0
        self._rows: np.ndarray | None = None  # [3, H] at the last committed position
        self.confidence: list[float] = []  # per draft of the last proposal: its probability

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        if count <= 0:
            return
        taps = np.asarray(self.base.tapped_tail(1))  # type: ignore[attr-defined]
        recorded = getattr(self.base, "layer_taps", self.config.taps)
        if taps.shape != (1, 2, self.config.hidden_size) or tuple(recorded) != self.config.taps:
            raise DraftError(f"trained head: the base records layers {tuple(recorded)} (rows "
                             f"of shape {taps.shape}); the head reads layers "
                             f"{self.config.taps}: were its layer taps changed after the "
                             "head was built?")
        high = np.asarray(rows[count - 1], np.float32)
        self._rows = np.concatenate([taps[0].astype(np.float32), high[None, :]])
        self.length += count

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None):
        n = min(int(k), self.k)
        if n < 1 or self._rows is None:
            return []
        if pos != self.length:
            raise DraftError(f"trained head asked to draft after position {pos}, but it has "
                             f"seen {self.length} committed positions")
        low, mid, high = self._rows
        eps, f = self.eps, self.products.f
        self.confidence = []
        if self.chain is not None and not self.samples:
            e0 = np.asarray(self.base.embed_row(int(token)), np.float32)  # type: ignore[attr-defined]
            picked, sure = self.chain(low, mid, high, e0, n, self.stop_below)
            self.confidence = [float(p) for p in sure]
            return self.answer([int(t) for t in self.d2t[picked]], None)
        u = f["fuse"](np.concatenate([_rms(low, eps), _rms(mid, eps), high])[None, :])
        tokens, qs = [], []
        x = int(token)
        for _ in range(n):
            e = np.asarray(self.base.embed_row(x), np.float32)  # type: ignore[attr-defined]
            z = f["into"](np.concatenate([_rms(u[0], eps), _rms(e, eps)])[None, :])
            h = _rms(z, eps)
            gu = f["gate_up"](h)
            gate, up = gu[:, : self.intermediate], gu[:, self.intermediate:]
            g = z + f["down"]((gate / (1.0 + np.exp(-gate)) * up).astype(np.float32))
            logits = self.lm((_rms(g, eps) * self.w_out).astype(np.float32))[0]
            top = int(np.argmax(logits))
            sure = float(1.0 / np.exp(logits - logits[top]).sum())  # softmax at the argmax
            if self.samples:
                # drawn over the draft vocabulary; q over the base's is zero outside it, which
                # is exactly what the draft was drawn from
                picked, q = self.choose_logits(logits[None, :])
                x = int(self.d2t[picked[0]])
                full = np.zeros(self.config.vocab_size, q.dtype)
                full[self.d2t] = q[0]
                qs.append(full)
                sure = float(q[0][picked[0]])
            else:
                x = int(self.d2t[top])
            tokens.append(x)
            self.confidence.append(sure)
            if sure < self.stop_below:  # the next draft needs this one right: not worth it
                break
            u = g
        return self.answer(tokens, np.stack(qs) if qs else None)


def load_head(path: str | Path, base: object, *, base_path: str | Path | None = None,
              k: int | None = None, lm_kind: str | None = None) -> EagleHead:
    """`EagleHead` of the head directory at `path` for `base` (the file at `base_path`)."""
    config, tensors = load_eagle(path)
    return EagleHead(config, tensors, base, base_path=base_path, k=k, lm_kind=lm_kind)


def fabricate_eagle(path: str | Path, base: object, *, intermediate: int = 64,
                    draft_vocab: int | None = None, seed: int = 0,
                    base_sha256: str = "0" * 64) -> Path:
    """A head of random weights for `base` (a fabricated target in tests): the right shapes,
    no skill. `draft_vocab` (default: the whole vocabulary) ids are drawn at random."""
    rng = np.random.default_rng(seed)
    h, v = int(base.hidden_size), int(base.vocab_size)  # type: ignore[attr-defined]
    layers = int(base.layer_count)  # type: ignore[attr-defined]
    d = v if draft_vocab is None else int(draft_vocab)
    config = EagleConfig(h, intermediate, d, v, layers,
                         default_taps(layers),
                         1e-6, "fabricated", base_sha256)
    shapes = config.tensor_shapes()
    tensors = {name: (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
               for name, shape in shapes.items() if name not in ("d2t", "out_norm")}
    tensors["out_norm"] = np.ones(h, np.float32)
    # a draft vocabulary that is not a prefix of the base's, as a trained one is not
    tensors["d2t"] = np.sort(rng.choice(v, size=d, replace=False)).astype(np.int64)
    return save_eagle(path, config, tensors)
