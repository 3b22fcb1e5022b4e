"""The project's own tests: the onebit plugin is loaded by its entry point (pip install -e)."""

from hypothesis import settings

settings.load_profile("onebit")
