"""The project's own tests: the onebit plugin is loaded by its entry point (pip install -e)."""

from hypothesis import settings

from pytest_onebit import profiles

pytest_plugins = ["pytester"]  # the plugin's own tests run it in fresh projects

# The plugin registers the profiles lazily (in pytest_configure, once Hypothesis is in use);
# this conftest is imported before that, so it registers them itself.
profiles.register()
settings.load_profile("onebit")
