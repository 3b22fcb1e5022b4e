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
    (SmolLM2), or with `path` the name of a model `onebit pull` knows (and no such file or
    folder) that model, pulled into the cache on first use. The model remembers its file
    (`source_path`): a trained draft head is found, and checked, by the file's sha256."""
    from onebit.models import load_model

    known = None
    if path is None or _known_name(path):
        from onebit.hub import DEFAULT_MODEL, MODELS, model_path

        known = MODELS[DEFAULT_MODEL if path is None else str(path)]
        path = model_path(known.name, pull=True, progress=progress)
    model = attach_tokenizer(load_model(path, **options), path)
    model.source_path = Path(path)
    if known is not None:
        if known.chat_template and model.tokenizer.chat_template is None:
            model.tokenizer.chat_template = known.chat_template
        if known.note:
            import sys

            print(f"[{known.note}]", file=sys.stderr)
    return model


def _known_name(path: str | Path) -> bool:
    """`path` names a model onebit pulls (and nothing on disk is called that)."""
    from onebit.hub import MODELS

    return isinstance(path, str) and path in MODELS and not Path(path).exists()
