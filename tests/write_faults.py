"""Writes that fail part-way, as a kill or a full disk makes them fail, for the tests of atomic run files.

    with failing_writes(lambda path: "last.ckpt" in path.name, after_bytes=4096, fault="full"):
        ...   # the first write past 4096 bytes into a matching file stops there with OSError(ENOSPC)

Every way a run writes a file goes through one of the functions patched here, whatever the code under test
does: `open`/`io.open` (pathlib, fsspec and `os.fdopen` call them), `os.write` and `os.sendfile` (the copy
`shutil.move` makes across filesystems). Counting is per file path, cumulative across opens.

fault="kill": the write stops half-done and the process ends at once (`os._exit`, as `kill -9` would: no
clean-up runs); only for child processes. fault="full": OSError(ENOSPC) after the bytes that fit, and every
later write into a matching file fails the same way (the disk stays full). fault="die": a `Killed` exception
(a BaseException, which nothing in the code under test catches for good) and every later write anywhere
raises it too, so that no clean-up can write anything: a kill, inside one process.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import sys
from pathlib import Path
from typing import Callable
from unittest import mock

KILLED_STATUS = 137


class Killed(BaseException):
    """A kill, simulated inside the process (fault="die")."""


def _fd_path(fd: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


class _Faults:
    def __init__(self, matches: Callable[[Path], bool], after_bytes: int, fault: str, from_open: int,
                 on_data: Callable[[bytes], bool] | None) -> None:
        assert fault in ("kill", "full", "die"), fault
        self.matches, self.after, self.fault, self.from_open = matches, after_bytes, fault, from_open
        self.on_data = on_data
        self.started = on_data is None
        self.written: dict[Path, int] = {}
        self.opens = 0
        self.tripped = False

    def armed(self, path: Path | None) -> bool:
        if self.tripped and self.fault == "die":
            return True
        return path is not None and self.matches(path) and self.opens >= self.from_open

    def allowance(self, path: Path, data) -> int:
        """How many bytes of `data` go through before the fault, which `trip` then raises."""
        size = len(data)
        if self.tripped:
            return 0
        if not self.started:
            raw = data.encode() if isinstance(data, str) else bytes(data)
            if not self.on_data(raw):
                return size
            self.started = True  # counting starts at the first write the fault waits for
        done = self.written.get(path, 0)
        room = max(self.after - done, 0)
        self.written[path] = done + min(size, room)
        return min(size, room)

    def trip(self, path: Path) -> None:
        self.tripped = True
        if self.fault == "kill":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(KILLED_STATUS)
        if self.fault == "die":
            raise Killed(f"killed while writing {path}")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


class _FaultyFile:
    """A file object whose writes go through `_Faults`; everything else is the real file's."""

    def __init__(self, real, path: Path, faults: _Faults) -> None:
        self._real, self._path, self._faults = real, path, faults

    def write(self, data):
        if not self._faults.armed(self._path):
            return self._real.write(data)
        n = self._faults.allowance(self._path, data)
        if n:
            self._real.write(data[:n])
            self._real.flush()
        if n < len(data):
            self._faults.trip(self._path)
        return n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._real.__exit__(*exc)

    def __iter__(self):
        return iter(self._real)

    def __getattr__(self, name):
        return getattr(self._real, name)


@contextlib.contextmanager
def failing_writes(matches: Callable[[Path], bool], after_bytes: int = 0, fault: str = "full", from_open: int = 0,
                   on_data: Callable[[bytes], bool] | None = None):
    """Writes into files whose path `matches` fail after `after_bytes` bytes each (see the module
    docstring); with `from_open`, only from the `from_open`-th opening of a matching file (by `open`) on;
    with `on_data`, only from the first write whose bytes it accepts on (counting from there)."""
    faults = _Faults(matches, after_bytes, fault, from_open, on_data)
    real_open, real_write, real_sendfile = builtins.open, os.write, os.sendfile

    def opening(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        if not any(c in mode for c in "wax+"):
            return f
        path = _fd_path(file) if isinstance(file, int) else Path(os.fsdecode(file)).absolute()
        if path is not None and matches(path):
            faults.opens += 1
        return _FaultyFile(f, path, faults) if faults.armed(path) else f

    def writing(fd, data):
        path = _fd_path(fd)
        if not faults.armed(path):
            return real_write(fd, data)
        n = faults.allowance(path, data)
        if n:
            real_write(fd, bytes(data[:n]))
        if n < len(data):
            faults.trip(path)
        return n

    def sending(out_fd, in_fd, offset, count):
        path = _fd_path(out_fd)
        if not faults.armed(path) or not faults.started:  # a copy's bytes are not seen here: on_data never starts it
            return real_sendfile(out_fd, in_fd, offset, count)
        n = faults.allowance(path, range(count))  # only its length counts
        sent = real_sendfile(out_fd, in_fd, offset, n) if n else 0
        if n < count:
            faults.trip(path)
        return sent

    with mock.patch.object(builtins, "open", opening), mock.patch.object(io, "open", opening), \
            mock.patch.object(os, "write", writing), mock.patch.object(os, "sendfile", sending):
        yield faults
