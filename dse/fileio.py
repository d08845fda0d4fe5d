"""Files dse writes: atomically (temp file + fsync + rename), and only inside the folder they belong to; and the
one way dse reads a text file people give it (:func:`read_input_text`: bounded, regular files only)."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import IO, Any

from dse.errors import SpecError

__all__ = ["atomic_write", "confined_path", "open_no_follow", "output_folder", "output_file", "read_input_text",
           "remove_stale_temps", "INPUT_MAX_BYTES"]

#: the most dse reads of one input file (issue 21: a few MB; a study, a CSV or a config.json is far smaller)
INPUT_MAX_BYTES = 4 * 2**20


def read_input_text(path: str | os.PathLike, what: str, files: str, missing: str = "file",
                    max_bytes: int = INPUT_MAX_BYTES) -> str:
    """The UTF-8 text (a BOM dropped) of an input file: a regular file (not a folder, FIFO, device or socket) of
    at most ``max_bytes``, else a SpecError naming the file. ``what`` is what the user should give ('a YAML
    file'), ``files`` the kind in the size message ('YAML files'), ``missing`` what is not there ('file').
    At most ``max_bytes + 1`` bytes are read, whatever the size was when it was checked."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such {missing}") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SpecError(f"{path}: is a directory, expected {what}")
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(f"{path}: not a regular file (a pipe, a device or a socket); give {what}")
    if st.st_size > max_bytes:
        raise SpecError(f"{path}: {st.st_size:,} bytes; dse reads {files} up to {max_bytes:,} bytes")
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    if len(raw) > max_bytes:
        raise SpecError(f"{path}: more than {max_bytes:,} bytes; dse reads {files} up to {max_bytes:,} bytes")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise SpecError(f"{path}:{line}: not valid UTF-8 text (byte {e.start})") from None

Writer = Callable[[IO[bytes]], Any]


@cache
def _umask() -> int:
    """The process umask (read once; os.umask can only be read by setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def open_no_follow(path: str | os.PathLike, mode: str = "a"):
    """Open a lock or state file (``mode`` 'a' or 'w') without following a symbolic link at ``path``.

    ``O_NOFOLLOW``: a link planted where dse keeps its ``.lock``, ``.flock`` or ``.budget.lock`` is refused
    with a clear error instead of truncating or appending to the file it points at (issue 21).
    """
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_TRUNC if mode == "w" else os.O_APPEND)
    try:
        fd = os.open(os.fspath(path), flags, 0o666)
    except OSError as e:
        if os.path.islink(path):
            raise SpecError(f"{path}: is a symbolic link; dse does not write its lock and state files through "
                            f"links (it would damage {os.path.realpath(path)}): remove the link") from None
        raise SpecError(f"{path}: cannot open for writing ({e.strerror})") from None
    return os.fdopen(fd, mode)


def confined_path(root: str | os.PathLike, name: str | os.PathLike) -> Path:
    """``root / name``, refusing any name that could land outside ``root``.

    ``name`` must be relative (no leading '/', no drive letter), must not
    contain a '..' part, and must not resolve (through symlinks) outside
    ``root``. Sub-folders (``plots/a.png``) are fine. SpecError otherwise.
    """
    text = os.fspath(name)
    if not isinstance(text, str) or not text.strip() or text.strip() in (".", "./"):
        raise SpecError(f"output file name {name!r}: expected a file name inside the output folder")
    if "\x00" in text:
        raise SpecError(f"output file name {text!r}: contains a NUL character")
    posix, win = PurePosixPath(text), PureWindowsPath(text)
    if posix.is_absolute() or win.is_absolute() or win.drive or text.startswith(("/", "\\")):
        raise SpecError(f"output file name {text!r}: absolute paths are refused; give a name inside the output folder")
    if ".." in posix.parts or ".." in win.parts:
        raise SpecError(f"output file name {text!r}: '..' is refused; files stay inside the output folder")
    base = Path(root).resolve()
    target = (base / text).resolve()
    if target != base and base not in target.parents:
        raise SpecError(f"output file name {text!r} resolves to {target}, outside the output folder {base}")
    if target == base:
        raise SpecError(f"output file name {text!r}: names the output folder itself, not a file in it")
    return target


def output_folder(out: str | os.PathLike, flag: str = "--out") -> Path:
    """Create the output folder ``out`` (and its parents), or say in one line why it cannot be, naming ``flag``.

    issue 21: a read-only place, an existing file or /proc/self/x as the output folder ended in tracebacks.
    """
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SpecError(f"{out}: the output folder exists as a file; give a folder with {flag}") from None
    except OSError as e:
        raise SpecError(f"{out}: cannot create the output folder ({e.strerror}); give a writable folder with "
                        f"{flag}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise SpecError(f"{out}: the output folder is not writable; give a writable folder with {flag}")
    return out


def output_file(path: str | os.PathLike, data: bytes | str | Writer, flag: str = "--out") -> Path:
    """:func:`atomic_write` of a file the command line names, with one line, naming ``flag``, if it cannot be
    written (its folder cannot be made, the path is a folder, the place is read-only)."""
    path = Path(path)
    if path.is_dir():
        raise SpecError(f"{path}: is a folder; give a file name with {flag}")
    output_folder(path.parent, flag)
    try:
        return atomic_write(path, data)
    except OSError as e:
        raise SpecError(f"{path}: cannot write the file ({e.strerror}); give a writable path with {flag}") from None


def atomic_write(path: str | os.PathLike, data: bytes | str | Writer, *,
                 root: str | os.PathLike | None = None) -> Path:
    """Write ``data`` to ``path`` atomically; return the final path.

    ``data`` is bytes, text (written as UTF-8), or a callable that writes to
    the binary file object it is given (``lambda f: df.to_parquet(f)``). The
    bytes go to a temp file in the same folder, which is flushed and fsynced
    and then moved over ``path`` with ``os.replace`` (atomic on POSIX and
    Windows); the folder is fsynced afterwards where the OS allows. If
    anything fails, including the callable, the temp file is removed, the
    previous ``path`` is left as it was, and the exception propagates.

    With ``root``, ``path`` is a name relative to ``root`` and is checked by
    :func:`confined_path` (no absolute paths, no '..', no symlink escapes).
    Missing parent folders are created.
    """
    target = confined_path(root, path) if root is not None else Path(path)
    if not (isinstance(data, (bytes, bytearray, memoryview, str)) or callable(data)):
        raise TypeError(f"atomic_write: data must be bytes, str or a callable, got {type(data).__name__}")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, str):
                f.write(data.encode("utf-8"))
            elif isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                data(f)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; give it the mode a plain open() would have
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)
    return target


#: The name of a temp file of :func:`atomic_write`: '.' + the target's name + mkstemp's 8 characters + '.tmp'.
_TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")


def remove_stale_temps(folder: str | os.PathLike, subfolders=("plots",)) -> list[Path]:
    """Remove the temp files that a killed :func:`atomic_write` left in ``folder`` (and its ``subfolders``).

    Call it holding the folder's lock (dse.study.run.OutputLock): a temp file of a write still in progress
    elsewhere looks the same. Only regular files named as atomic_write names them are removed (never a link,
    never another file). Returns what was removed.
    """
    removed = []
    for d in [Path(folder), *(Path(folder) / s for s in subfolders)]:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if _TEMP_NAME.match(e.name) and e.is_file(follow_symlinks=False):
                with suppress(OSError):
                    os.unlink(e.path)
                    removed.append(Path(e.path))
    return removed


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); a no-op where folders cannot be opened."""
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
