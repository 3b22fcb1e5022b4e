"""Opening model files safely: regular files only, never waiting on a FIFO or a device.

A FIFO where `config.json` should be would block `open()` until a writer appears, and a
character device can be read forever; both are refused by looking at the file's type first.
`read_small` opens without blocking and checks the type on the open descriptor, so nothing can
swap the file in between.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from onebit.models.errors import ModelFileError

# config.json and the shard index are a few KiB; anything past this is not one of them.
SMALL_FILE_LIMIT = 16 * 1024 * 1024


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: Path, error: type[ValueError] = ModelFileError) -> Path:
    """`path` when it is a regular file (links followed); else `error` naming it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as failure:
        raise error(f"{path}: cannot read: {failure.strerror or failure}") from None
    if not stat.S_ISREG(mode):
        raise error(f"{path}: is {_kind(mode)}; a model file must be a regular file")
    return path


def read_small(path: Path, error: type[ValueError] = ModelFileError) -> str:
    """The UTF-8 text of a small regular file (config.json, the shard index); `error` naming
    the file when it is missing, not a regular file, too large or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as failure:
        raise error(f"{path}: cannot read: {failure.strerror or failure}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise error(f"{path}: is {_kind(mode)}; a model file must be a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(SMALL_FILE_LIMIT + 1)
    if len(data) > SMALL_FILE_LIMIT:
        raise error(f"{path}: larger than {SMALL_FILE_LIMIT} bytes; not a config file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as failure:
        raise error(f"{path}: not UTF-8 text (byte {failure.start} is {data[failure.start]:#04x})"
                    ) from None
