"""Errors of the backends: all `ValueError`s, like the forward's own (onebit.models.errors)."""

from __future__ import annotations


class BackendError(ValueError):
    """A backend was asked for something it cannot do (a bad name, option, shape or file)."""


class BackendUnavailableError(BackendError):
    """The backend's runtime is not on this machine (torch, CUDA, pyxrt); the message says
    which part is missing."""


class DeviceRunError(RuntimeError):
    """A kernel run on the device did not complete; the message names the kernel and state."""
