"""The llama.cpp arm of `peer_ab.py`: a GGUF made from onebit's float checkpoint with llama.cpp's
own converter, quantised by llama.cpp, and decoded through llama-cpp-python.

Nothing here is copied from llama.cpp. The converter (`convert_hf_to_gguf.py` and the
`conversion` and `gguf-py` packages beside it) is the one vendored in the llama-cpp-python
source distribution of the installed version; it is found in `--llama-cpp-src`, in
$LLAMA_CPP_SRC, or in a cache that `pip download` fills once. Two things the converter needs
that a fabricated checkpoint lacks are supplied at run time, never by editing its code:
`architectures` in config.json (written into a staging copy), and a vocabulary: the model has
no tokenizer, so its converter class is subclassed with a `set_vocab` that writes the "none"
tokenizer and the vocabulary size (llama.cpp then makes that many dummy tokens).

Every failure is a `PeerUnavailable` whose message says exactly what is missing or what
failed, so the benchmark can print it and go on without this arm.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ARCHITECTURE = "Qwen3ForCausalLM"  # what config.json's model_type "qwen3" is in transformers
SDIST = "llama-cpp-python"
VENDORED = "vendor/llama.cpp/"
# what the converter needs from the vendored llama.cpp tree (scripts, not the C++ sources)
CONVERTER_PARTS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")


class PeerUnavailable(RuntimeError):
    """The llama.cpp arm cannot run here; the message says why."""


def llama_cpp_version() -> str:
    try:
        import llama_cpp
    except ImportError as error:
        raise PeerUnavailable(
            f"llama_cpp does not import ({error}); install the bench extra (docs/tools.md)"
        ) from None
    return llama_cpp.__version__


# ---------------------------------------------------------------------------------------------
# Finding the converter


def converter_source(explicit: Path | None, version: str) -> Path:
    """The llama.cpp directory holding convert_hf_to_gguf.py: `explicit`, $LLAMA_CPP_SRC, or
    the cached extract of the llama-cpp-python sdist of `version` (downloaded once)."""
    given = explicit or (Path(os.environ["LLAMA_CPP_SRC"]) if "LLAMA_CPP_SRC" in os.environ
                         else None)
    if given is not None:
        if not (given / "convert_hf_to_gguf.py").is_file():
            raise PeerUnavailable(f"{given}: no convert_hf_to_gguf.py there (--llama-cpp-src "
                                  "or LLAMA_CPP_SRC must name a llama.cpp source tree)")
        return given
    cache_root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = cache_root / "onebit" / f"llama.cpp-{version}"
    if not (cache / "convert_hf_to_gguf.py").is_file():
        _extract_converter(_download_sdist(version), cache)
    return cache


def _download_sdist(version: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix="llama-sdist-"))
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--quiet", "-d", str(where), f"{SDIST}=={version}"]
    done = subprocess.run(command, capture_output=True, text=True)
    found = sorted(where.glob("*.tar.gz"))
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PeerUnavailable(f"the converter ships in the {SDIST}=={version} sdist, and "
                              f"`pip download` could not fetch it: {tail[0]} (give "
                              "--llama-cpp-src DIR to use a llama.cpp tree instead)")
    return found[0]


def _extract_converter(sdist: Path, into: Path) -> None:
    """Copy the converter's files out of the sdist into `into` (written whole or not at all)."""
    into.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="llama-converter-", dir=into.parent))
    with tarfile.open(sdist) as archive:
        members = []
        for member in archive.getmembers():
            rest = member.name.partition("/")[2]  # below the sdist's top folder
            if rest.startswith(VENDORED):
                inner = rest[len(VENDORED):]
                if any(inner == p or inner.startswith(p) for p in CONVERTER_PARTS) and (
                        member.isfile() or member.isdir()):
                    member.name = inner
                    members.append(member)
        if not any(m.name == "convert_hf_to_gguf.py" for m in members):
            raise PeerUnavailable(f"{sdist.name} has no {VENDORED}convert_hf_to_gguf.py")
        archive.extractall(staging, members=members, filter="data")
    try:
        os.replace(staging, into)
    except OSError:  # another run extracted it first
        if not (into / "convert_hf_to_gguf.py").is_file():
            raise
        shutil.rmtree(staging)


# ---------------------------------------------------------------------------------------------
# Converting and quantising


def convert_to_gguf(checkpoint: Path, out: Path, source: Path) -> Path:
    """Run llama.cpp's convert_hf_to_gguf.py (in this process) on onebit's float checkpoint,
    writing an F32 GGUF to `out`."""
    staging = out.parent / "hf-for-gguf"
    staging.mkdir(parents=True, exist_ok=True)
    config = json.loads((checkpoint / "config.json").read_text())
    config.setdefault("architectures", [ARCHITECTURE])
    (staging / "config.json").write_text(json.dumps(config, indent=2))
    for shard in checkpoint.glob("*.safetensors*"):
        target = staging / shard.name
        if not target.exists():
            target.symlink_to(shard.resolve())
    converter = _import_converter(source)
    _without_tokenizer(converter, config["architectures"][0])
    argv, log = sys.argv, io.StringIO()
    sys.argv = ["convert_hf_to_gguf.py", str(staging), "--outfile", str(out), "--outtype", "f32"]
    # its log and progress bars go to `log` (a root handler makes its basicConfig a no-op)
    handler = logging.StreamHandler(log)
    logging.getLogger().addHandler(handler)
    try:
        with contextlib.redirect_stderr(log), contextlib.redirect_stdout(log):
            converter.main()
    except SystemExit as stop:
        raise PeerUnavailable(f"convert_hf_to_gguf.py exited with status {stop.code} on "
                              f"{checkpoint}: {_last_line(log)}") from None
    except Exception as error:  # the converter's own failure, reported as the reason
        raise PeerUnavailable(f"convert_hf_to_gguf.py failed on {checkpoint}: "
                              f"{type(error).__name__}: {error}") from None
    finally:
        sys.argv = argv
        logging.getLogger().removeHandler(handler)
    if not out.is_file():
        raise PeerUnavailable(f"convert_hf_to_gguf.py wrote no {out}")
    return out


def _last_line(log: io.StringIO) -> str:
    lines = [line for line in log.getvalue().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _import_converter(source: Path):
    import importlib.util

    sys.path.insert(0, str(source))  # its `conversion` package; it adds gguf-py itself
    spec = importlib.util.spec_from_file_location("convert_hf_to_gguf",
                                                  source / "convert_hf_to_gguf.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        raise PeerUnavailable(f"{source}/convert_hf_to_gguf.py does not import: {error}") from None
    return module


def _without_tokenizer(converter, architecture: str) -> None:
    """Make the converter's class for `architecture` write no tokenizer, only the vocabulary
    size: a subclass that `main()` is handed instead of the original."""
    try:
        original = converter.get_model_class(architecture)
    except NotImplementedError as error:
        raise PeerUnavailable(f"this llama.cpp converter does not know {architecture}: "
                              f"{error}") from None

    class NoTokenizer(original):
        model_arch = original.model_arch  # the converter demands each class declare it

        def set_vocab(self) -> None:
            self.gguf_writer.add_tokenizer_model("none")
            self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])

    NoTokenizer.__name__ = f"{original.__name__}NoTokenizer"

    def model_class(name: str, mmproj: bool = False):
        return NoTokenizer if name == architecture and not mmproj else original

    converter.get_model_class = model_class


def quantize(source: Path, out: Path, ftype_name: str = "LLAMA_FTYPE_MOSTLY_Q4_0",
             threads: int = 2) -> Path:
    """llama.cpp's own quantiser. `pure`: every matrix (the tied embedding / output too) gets
    the one type, as Q4NX quantises every matrix that tiles; llama.cpp's default would keep
    the output in Q6_K."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype_name)
    params.nthread = threads
    params.pure = True
    log = out.with_suffix(".log")
    with _native_stderr_to(log):  # llama.cpp logs every tensor it quantises
        status = llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params)
    if status != 0 or not out.is_file():
        lines = log.read_text(errors="replace").strip().splitlines() or ["(no log)"]
        raise PeerUnavailable(f"llama_model_quantize({source.name} -> {ftype_name}) "
                              f"returned {status}: {lines[-1]}")
    return out


@contextlib.contextmanager
def _native_stderr_to(path: Path):
    """Send file descriptor 2 (where C code writes) to `path` for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "wb") as sink:
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def gguf_bytes_per_token(path: Path) -> int:
    """Bytes of tensors one token reads from a GGUF: every tensor, except that an untied
    token embedding is read one row per token (counted as nothing here, like onebit's)."""
    from gguf import GGUFReader

    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(str(path)).tensors}
    if "output.weight" in tensors:
        tensors.pop("token_embd.weight", None)
    return sum(tensors.values())


# ---------------------------------------------------------------------------------------------
# Decoding


class LlamaEngine:
    """Greedy decode through llama-cpp-python's `Llama.eval`: the prompt in one batch, then one
    token per eval, the argmax of the last logits picked here (no sampler in the way)."""

    engine = "llama.cpp"

    def __init__(self, path: Path, fmt: str, threads: int, n_ctx: int) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.format = fmt
        self.path = path
        self.bytes_per_token = gguf_bytes_per_token(path)
        self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx,
                                   n_threads=threads, n_threads_batch=threads, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def _argmax(self) -> int:
        import numpy as np

        row = self._llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(row, shape=(self.n_vocab,))))

    def generate(self, prompt: list[int], n: int):
        """`n` greedy tokens after `prompt`: (tokens, prefill seconds, decode seconds)."""
        self.llm.reset()
        start = time.perf_counter()
        self.llm.eval(prompt)
        tokens = [self._argmax()]
        first = time.perf_counter()
        while len(tokens) < n:
            self.llm.eval([tokens[-1]])
            tokens.append(self._argmax())
        return tokens, first - start, time.perf_counter() - first

