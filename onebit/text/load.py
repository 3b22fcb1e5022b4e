"""A model ready for text: loaded from a path (or the default model, pulled on first use) with
its tokenizer attached."""

from __future__ import annotations

from pathlib import Path

from onebit.text.errors import TokenizerError
from onebit.text.tokenizer import Tokenizer


def attach_tokenizer(model, path: str | Path):
    """Give `model` a `tokenizer` when it has none: a checkpoint directory's tokenizer.json
    (with tokenizer_config.json when present). A GGUF's comes with the loader."""
    if getattr(model, "tokenizer", None) is not None:
        return model
    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    json_file = folder / "tokenizer.json"
    if not json_file.is_file():
        raise TokenizerError(f"{path}: the model carries no tokenizer (no tokenizer metadata, "
                             f"no {json_file.name} beside it)")
    config = folder / "tokenizer_config.json"
    model.tokenizer = Tokenizer.from_file(json_file, config if config.is_file() else None)
    return model


def load_text_model(path: str | Path | None, *, progress: bool = True, **options):
    """The model at `path` with its tokenizer, or with `path` None the default model
    (SmolLM2), pulled into the cache on first use. The model remembers its file
    (`source_path`): a trained draft head is found, and checked, by the file's sha256."""
    from onebit.models import load_model

    if path is None:
        from onebit.hub import model_path

        path = model_path(pull=True, progress=progress)
    model = attach_tokenizer(load_model(path, **options), path)
    model.source_path = Path(path)
    return model
