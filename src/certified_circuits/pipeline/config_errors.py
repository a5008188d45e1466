"""The error of a workflow config that cannot work (every check of ``pipeline/config.py``, ``config_paths.py`` and
``config_files.py`` raises it; the Snakefile prints its message and stops before any job)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key, the value and the fix."""


def config_error(key, value, expected):
    raise ConfigError(f"config key {key} = {value!r} is invalid: {expected}")
