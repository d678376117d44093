"""Writing files so that a kill or a full disk never leaves a half-written one in place, and turning
names read from files into paths only after a check."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Replace `path` with `data` all at once: a temp file in the same folder (so `os.replace` never
    crosses a filesystem), fsync'd, then renamed. A kill or a full disk leaves the old file whole and no
    temp file behind."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, new_file_mode())  # mkstemp makes it 0600 whatever the umask; a plain open() would not
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def _umask_shown() -> int | None:
    """The process's umask as Linux shows it (/proc/self/status, since Linux 4.7), read without changing it;
    None where it is not shown."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_set_and_restored() -> int:
    # os.umask can only be read by setting it, and the umask is the whole process's: a thread creating a file in
    # between would get the value set here. Done once, at import, and only where the OS does not show it.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _umask_shown()
if _UMASK_AT_IMPORT is None:
    _UMASK_AT_IMPORT = _umask_set_and_restored()


def new_file_mode() -> int:
    """The permission bits a plain open() gives a new file: 0o666 less the umask (the current one where the OS
    shows it, else the one at import)."""
    return 0o666 & ~_umask()


def new_dir_mode() -> int:
    """The permission bits a plain mkdir() gives a new folder: 0o777 less the umask (tempfile.mkdtemp's are 0o700
    whatever the umask, so a cache built through one would be private to its builder)."""
    return 0o777 & ~_umask()


def _umask() -> int:
    umask = _umask_shown()
    return _UMASK_AT_IMPORT if umask is None else umask


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (a no-op where the OS cannot open folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def publish_folder(target: str | Path, write: Callable[[Path], None], *, scratch: str | None = None,
                   replace: bool = False) -> Path:
    """Build a folder whole beside `target`, then rename it to `target`: a reader, a kill or a full disk never
    meets a half-built `target`.

    `write(folder)` fills the folder being built. `scratch` names it `.<target>.<scratch>.tmp`, a name a later
    call (or a reader passing hidden folders over) can recognise after a kill; None makes a private unique one,
    for writers that may race (the first rename wins; the caller decides whether a lost race is an error).
    Without `replace` the rename takes `target` only where it is absent or an empty folder (else OSError).
    With `replace` an existing `target` moves to `.<target>.old.tmp` first and is deleted after the rename,
    or put back if the rename fails. Whatever fails removes the folder being built and raises; `target` stays
    as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if scratch is None:
        building = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        # mkdtemp makes it private whatever the umask; a shared folder should not be
        building.chmod(new_dir_mode())
    else:
        building = target.with_name(f".{target.name}.{scratch}.tmp")
        shutil.rmtree(building, ignore_errors=True)  # what a killed earlier build left
        building.mkdir()
    old = target.with_name(f".{target.name}.old.tmp")
    if replace:
        shutil.rmtree(old, ignore_errors=True)
    try:
        write(building)
        if replace and (target.exists() or target.is_symlink()):
            os.replace(target, old)
        os.replace(building, target)
    except BaseException:
        if replace and old.exists() and not target.exists():
            os.replace(old, target)  # the swap itself failed: the previous folder goes back
        shutil.rmtree(building, ignore_errors=True)
        raise
    if replace:
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(target.parent)
    return target


def replace_together(contents: dict[Path, bytes]) -> tuple[Path, ...]:
    """Replace several files that belong together (a report and its picture): each is written whole to a hidden
    sibling first, then all are renamed into place one after another, so a full disk while writing leaves the
    earlier set as it was (never a new report beside an older picture) and no temporary file behind."""
    staged: dict[Path, Path] = {}
    try:
        for path, data in contents.items():
            path = Path(path)
            staged[path] = atomic_write_bytes(path.with_name(f".{path.name}.new.tmp"), data)
        for path, temp in staged.items():
            os.replace(temp, path)
    finally:
        for temp in staged.values():
            temp.unlink(missing_ok=True)  # only those not renamed are still there
    return tuple(staged)


def finite_or_none(value):
    """A copy of a JSON-able value with NaN and ±inf floats (numpy's too) as None: JSON has no such numbers,
    and every reader refuses the `NaN` that `json.dumps` would write."""
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def json_line(record) -> str:
    """One JSON-lines record, non-finite numbers written as null, ending in a newline."""
    return json.dumps(finite_or_none(record), default=float, allow_nan=False) + "\n"


def safe_name(name: object, what: str = "name") -> str:
    """`name` if it can be one path component: a non-empty string with no separator, NUL, `.` or `..`
    and not absolute. Raises ValueError with one line otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{what} must be a non-empty string, got {name!r:.80}")
    if name in (".", "..") or "/" in name or "\\" in name or "\0" in name or os.path.isabs(name):
        raise ValueError(f"{what} {name!r:.80} cannot be a file name (no separators, '.', '..' or absolute paths)")
    if len(name.encode("utf-8", "surrogatepass")) > 200:
        raise ValueError(f"{what} {name[:40]!r}... is longer than 200 bytes")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {name!r:.80} is not valid text") from None
    return name


def check_output_path(path: str | Path, *, kind: str = "file", fresh: bool = False) -> Path:
    """Check an output path before any work starts. kind="file": not an existing folder, its folder
    exists or can be made. kind="folder": not an existing file; with fresh=True it must be absent or
    empty (so that stale files of an earlier export are never mixed in). Raises ValueError, one line."""
    path = Path(path)
    if kind == "file":
        if path.is_dir():
            raise ValueError(f"output {path} is a folder; give a file path")
        parent = path.parent
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"output {path}: {parent} is a file, not a folder")
        for above in parent.parents:
            if above.exists() and not above.is_dir():
                raise ValueError(f"output {path}: {above} is a file, not a folder")
    elif kind == "folder":
        if path.exists() and not path.is_dir():
            raise ValueError(f"output folder {path} is an existing file")
        for above in path.parents:
            if above.exists() and not above.is_dir():
                raise ValueError(f"output folder {path}: {above} is a file, not a folder")
        if fresh and path.is_dir() and any(path.iterdir()):
            raise ValueError(f"output folder {path} is not empty; give a new or empty folder")
    else:
        raise ValueError(f"kind must be 'file' or 'folder', got {kind!r}")
    return path
