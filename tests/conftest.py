"""The project's own tests: the onebit plugin is loaded by its entry point (pip install -e)."""

from hypothesis import settings

pytest_plugins = ["pytester"]  # the plugin's own tests run it in fresh projects

settings.load_profile("onebit")
