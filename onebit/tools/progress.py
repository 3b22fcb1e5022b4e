"""`Progress`, the progress bar on stderr, from its old home: it lives in onebit/progress.py,
under the model cache (onebit/hub.py) that draws it too (docs/README.md, "Imports go down")."""

from onebit.progress import Progress

__all__ = ["Progress"]
