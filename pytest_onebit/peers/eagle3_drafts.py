"""EAGLE-3 draft GGUFs for llama-server's `--spec-type draft-eagle3`, made from onebit's own
exports by llama.cpp's own converter (docs/peers.md, "The llama-server peer"; docs/heads.md,
"Exporting a head: the speculators EAGLE-3 layout").

`eagle3_drafts(target, source)` returns {"shipped": GGUF, "random": GGUF}:

1. the target in Hugging Face form, written from its GGUF by transformers (`config.json`,
   `tokenizer.json`: what the converter reads of the target, `--target-model-dir`);
2. `onebit export-head --head SHIPPED --inexact` (the head shipped for the target's file) and
   `onebit export-head --head SHIPPED --fabricate SEED --inexact` (a seeded random head of its
   shapes), each the speculators EAGLE-3 layout;
3. `python convert_hf_to_gguf.py EXPORT --target-model-dir HF --outfile DRAFT.gguf` from the
   llama.cpp source tree `source` (the tree the llama-server binary was built from), which
   detects EAGLE-3 and writes arch `eagle3`.

The exports are not exact EAGLE-3 versions of onebit's head (no attention, other tap
normalisation), which the peer does not need: greedy output under any draft must equal plain
decoding, and the random head is the garbage-draft case of the same path.

Each GGUF is cached under `$ONEBIT_HOME/drafts/<target>-<sha256>/` by the content of what
made it: the target's sha256, which head (the shipped head's pinned sha256s; the seed), the
sha256 of onebit's exporter sources, of llama.cpp's converter sources and the transformers
version. A second run with the same inputs converts nothing; a changed converter or exporter
makes a new file. Files are written to a temporary name and renamed into place, so a run
stopped halfway leaves nothing half-written.

The converter imports `sentencepiece` whatever the tokenizer; where the running Python has
none, a stub module that only lets the import pass is put on the converter's `PYTHONPATH`
(SmolLM2's tokenizer is read from tokenizer.json, never through sentencepiece).

Everything that can be missing fails as `Eagle3DraftError` naming it: no llama.cpp source
tree, no converter in it, no torch or transformers, no shipped head for the target, an export
or a conversion that fails (with the tail of what it printed).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: where the llama.cpp source tree is named when it is not beside the binary
SOURCE_ENV = "ONEBIT_LLAMA_CPP_SRC"
CONVERTER = "convert_hf_to_gguf.py"
#: the converter's sources whose content keys the cache (its EAGLE-3 path is in llama.py)
CONVERTER_FILES = (CONVERTER, "conversion/base.py", "conversion/llama.py")
#: onebit's sources that make the export
EXPORTER_FILES = ("onebit/heads/speculators.py", "onebit/heads/eagle.py",
                  "onebit/commands/export_head.py")
HEADS = ("shipped", "random")
DEFAULT_SEED = 7
EXPORT_TIMEOUT = 300
CONVERT_TIMEOUT = 600
TAIL_LINES = 20
STUB = "class SentencePieceProcessor:  # onebit's stub: the import passes, nothing else\n    pass\n"


class DraftMakeError(RuntimeError):
    """A draft GGUF could not be made: what is missing, or what failed and what it printed
    (the EAGLE-3, DFlash, DSpark and MTP makers' errors are all of this kind)."""


class Eagle3DraftError(DraftMakeError):
    """An EAGLE-3 draft GGUF could not be made: what is missing, or what failed and what it
    printed."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def find_llama_cpp_source(explicit: str | Path | None = None,
                          binary: str | Path | None = None) -> Path | None:
    """The llama.cpp source tree: `explicit`, else `$ONEBIT_LLAMA_CPP_SRC`, else the nearest
    folder above the llama-server binary that holds convert_hf_to_gguf.py (a binary built as
    docs/tools.md says lies in `llama.cpp/build/bin/`). None when none of them gives one; an
    explicit or environment path is returned as given, for `require_source` to check."""
    if explicit is not None:
        return Path(explicit).expanduser()
    if os.environ.get(SOURCE_ENV):
        return Path(os.environ[SOURCE_ENV]).expanduser()
    if binary is not None:
        for folder in list(Path(binary).resolve().parents)[:4]:
            if (folder / CONVERTER).is_file():
                return folder
    return None


def require_source(source: str | Path | None) -> Path:
    """`source` checked to be a llama.cpp tree with its converter; Eagle3DraftError naming
    what is missing otherwise."""
    if source is None:
        raise Eagle3DraftError(
            f"no llama.cpp source tree for the EAGLE-3 drafts: pass --llama-cpp-src DIR or set "
            f"${SOURCE_ENV} (the tree llama-server was built from, with {CONVERTER}; "
            f"docs/tools.md: building llama-server)")
    source = Path(source)
    if not source.is_dir():
        raise Eagle3DraftError(f"the llama.cpp source tree {str(source)!r} is not a directory")
    missing = [name for name in CONVERTER_FILES if not (source / name).is_file()]
    if missing:
        raise Eagle3DraftError(f"{source} has no {', '.join(missing)}: not a llama.cpp source "
                               f"tree whose converter makes EAGLE-3 drafts")
    for module in ("torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            raise Eagle3DraftError(f"llama.cpp's {CONVERTER} needs {module}, which "
                                   f"{sys.executable} cannot import")
    return source


def _sha256_files(root: Path, names: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256((root / name).read_bytes()).digest())
    return digest.hexdigest()


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _shipped_head(target: Path) -> Path:
    from onebit.heads.errors import DraftError
    from onebit.heads.shipped import shipped_for

    try:
        found = shipped_for(target)
    except DraftError as error:
        raise Eagle3DraftError(f"the shipped head for {target.name}: {error}") from error
    if found is None:
        raise Eagle3DraftError(f"onebit ships no head for {target.name} (its sha256 is not "
                               f"one a shipped head was made for): no EAGLE-3 draft to export")
    return found


def _head_pins(head: Path) -> list[str]:
    from onebit.heads.eagle import CONFIG_FILE, WEIGHTS_FILE

    return [hashlib.sha256((head / name).read_bytes()).hexdigest()
            for name in (CONFIG_FILE, WEIGHTS_FILE)]


def _publish(partial: Path, final: Path) -> Path:
    """`partial` renamed to `final`, unless another run put `final` there first."""
    if final.exists():
        if partial.is_dir():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.unlink(missing_ok=True)
        return final
    os.replace(partial, final)
    return final


def hf_target(target: str | Path, folder: str | Path) -> Path:
    """The target in Hugging Face form, `folder` (config.json, tokenizer.json and what
    transformers writes beside them), from its GGUF by transformers; made once."""
    target, folder = Path(target), Path(folder)
    if (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file():
        return folder
    try:
        from transformers import AutoConfig, AutoTokenizer
    except ImportError as error:
        raise Eagle3DraftError(f"writing the target in HF form needs transformers: {error}"
                               ) from error
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        AutoConfig.from_pretrained(target.parent, gguf_file=target.name).save_pretrained(
            partial)
        AutoTokenizer.from_pretrained(target.parent, gguf_file=target.name).save_pretrained(
            partial)
    except Exception as error:  # transformers' GGUF reader raises many kinds
        shutil.rmtree(partial, ignore_errors=True)
        raise Eagle3DraftError(f"transformers could not write {target.name} in HF form: "
                               f"{type(error).__name__}: {error}") from error
    for name in ("config.json", "tokenizer.json"):
        if not (partial / name).is_file():
            shutil.rmtree(partial, ignore_errors=True)
            raise Eagle3DraftError(f"transformers wrote no {name} for {target.name}")
    return _publish(partial, folder)


def with_architectures(hf: str | Path) -> Path:
    """`hf`'s config.json given the `architectures` field transformers leaves out of a
    config read from a GGUF (its causal-LM class for the config's `model_type`): the
    converter's DFlash path reads the target's architecture to pick its vocabulary handler.
    Rewritten in place (a temporary file renamed), once; a no-op when the field is there."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    path = Path(hf) / "config.json"
    config = json.loads(path.read_text())
    if config.get("architectures"):
        return Path(hf)
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type", ""))
    if name is None:
        raise Eagle3DraftError(f"{path}: transformers knows no causal-LM class for "
                               f"model_type {config.get('model_type')!r}")
    config["architectures"] = [name]
    partial = path.with_name(f".config.json.{os.getpid()}.partial")
    partial.write_text(json.dumps(config, indent=2, sort_keys=True))
    os.replace(partial, path)
    return Path(hf)


def export_head(target: str | Path, head: str | Path, out: str | Path, *,
                seed: int | None = None) -> Path:
    """`onebit export-head --model TARGET --head HEAD --inexact --out OUT` (with
    `--fabricate SEED` when a seed is given), in a child process; Eagle3DraftError with what
    it printed when it fails."""
    argv = [sys.executable, "-m", "onebit.cli", "export-head", "--model", str(target),
            "--head", str(head), "--inexact", "--out", str(out)]
    if seed is not None:
        argv += ["--fabricate", str(seed)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=EXPORT_TIMEOUT,
                              cwd=_repo_root())
    except subprocess.TimeoutExpired as error:
        raise Eagle3DraftError(f"onebit export-head ran past {EXPORT_TIMEOUT} s") from error
    if done.returncode != 0:
        raise Eagle3DraftError(f"onebit export-head exited {done.returncode}:\n"
                               f"{_tail(done.stderr + done.stdout)}")
    return Path(out)


def _converter_env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    if importlib.util.find_spec("sentencepiece") is None:
        stub = scratch / "sentencepiece-stub"
        stub.mkdir(exist_ok=True)
        (stub / "sentencepiece.py").write_text(STUB)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(stub), env.get("PYTHONPATH", "")) if p)
    return env


def convert(source: str | Path, export: str | Path, hf: str | Path, out: str | Path, *,
            arch: str = "eagle3") -> Path:
    """llama.cpp's `convert_hf_to_gguf.py EXPORT --target-model-dir HF --outfile OUT`, run
    with this Python from the source tree; the GGUF is written beside `out` and renamed into
    place. Eagle3DraftError with the converter's stderr tail when it fails or writes a file
    of another arch than `arch` (the DFlash maker passes "dflash")."""
    source, out = require_source(source), Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory() as scratch:
        argv = [sys.executable, str(source / CONVERTER), str(export), "--target-model-dir",
                str(hf), "--outfile", str(partial)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=CONVERT_TIMEOUT, cwd=source,
                                  env=_converter_env(Path(scratch)))
        except subprocess.TimeoutExpired as error:
            partial.unlink(missing_ok=True)
            raise Eagle3DraftError(f"{CONVERTER} ran past {CONVERT_TIMEOUT} s") from error
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise Eagle3DraftError(f"llama.cpp's {CONVERTER} exited {done.returncode} on "
                               f"{export}:\n{_tail(done.stderr + done.stdout)}")
    written = _architecture(partial)
    if written != arch:
        partial.unlink(missing_ok=True)
        raise Eagle3DraftError(f"llama.cpp's {CONVERTER} wrote arch {written!r}, not {arch}, "
                               f"from {export}:\n{_tail(done.stderr)}")
    return _publish(partial, out)


def _architecture(path: Path) -> str | None:
    import gguf

    field = gguf.GGUFReader(str(path)).get_field("general.architecture")
    return None if field is None else field.contents()


def recipe(target_sha256: str, source: Path, head: str, seed: int, shipped: Path) -> dict:
    """What a draft GGUF is made from, by content: its cache key is this recipe's sha256."""
    import transformers

    return {"target_sha256": target_sha256, "head": head,
            "seed": seed if head == "random" else None,
            "shipped_head_sha256": _head_pins(shipped),
            "exporter_sha256": _sha256_files(_repo_root(), EXPORTER_FILES),
            "converter_sha256": _sha256_files(source, CONVERTER_FILES),
            "transformers": transformers.__version__}


def eagle3_drafts(target: str | Path, source: str | Path | None, *,
                  seed: int = DEFAULT_SEED, heads: tuple[str, ...] = HEADS
                  ) -> dict[str, Path]:
    """{"shipped": the shipped head's EAGLE-3 GGUF, "random": a seeded random head's}, made
    as the module says and cached by the content of what made them (for `heads` only)."""
    from onebit.gguf.derive import drafts_home
    from onebit.hub import sha256_of

    unknown = [h for h in heads if h not in HEADS]
    if unknown:
        raise ValueError(f"unknown EAGLE-3 head {unknown[0]!r}; one of {', '.join(HEADS)}")
    target = Path(target)
    if not target.is_file():
        raise Eagle3DraftError(f"the target {str(target)!r} is not a file")
    source = require_source(source)
    shipped = _shipped_head(target)
    target_sha = sha256_of(target)
    folder = drafts_home() / f"{target.stem}-{target_sha[:16]}"
    made: dict[str, Path] = {}
    for head in heads:
        plan = recipe(target_sha, source, head, seed, shipped)
        key = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:16]
        name = f"eagle3-{head}{seed if head == 'random' else ''}-{key}"
        out = folder / f"{name}.gguf"
        if not out.is_file():
            hf = hf_target(target, folder / f"hf-target-transformers{plan['transformers']}")
            with tempfile.TemporaryDirectory() as scratch:
                export = export_head(target, shipped, Path(scratch) / "export",
                                     seed=seed if head == "random" else None)
                convert(source, export, hf, out)
            (folder / f"{name}.json").write_text(json.dumps(plan, indent=1, sort_keys=True))
        made[head] = out
    return made


__all__ = ["DEFAULT_SEED", "DraftMakeError", "Eagle3DraftError", "HEADS", "SOURCE_ENV",
           "convert", "eagle3_drafts", "find_llama_cpp_source", "hf_target", "require_source",
           "with_architectures"]
