"""The one way rocmcheck reads a file a person names, and the one way it writes one.

Reading: a regular file only (a FIFO would block forever, /dev/zero never ends, a directory is a mistake), at most
`limit` bytes, UTF-8; anything else is a BadInput with one line to show. Writing: a temporary file in the
same folder, fsync, then rename over the target, so a full disk or a file-size limit leaves the old file whole;
an existing file is replaced only when the caller says so (--force), and a symbolic link at the target is never
followed (refused, or with --force replaced itself)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from rocmcheck.errors import BadInput
from rocmcheck.safe.text import excerpt
from rocmcheck.units import MIB

# Config files (DeepSpeed JSON, LLaMA-Factory YAML, config.json): the largest real ones are a few KiB; a model's
# config.json with an id2label table is under 1 MiB. 8 MiB is far above any of them and still reads in an instant.
MAX_CONFIG_BYTES = 8 * MIB
# Bundles: the runner keeps at most 2,000,000 characters per stream of each of ~8 tools, so a bundle cannot
# honestly exceed ~40 MB; 64 MiB leaves room for the Python-probe data and the recorded stage verdicts.
MAX_BUNDLE_BYTES = 64 * MIB

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str | None:
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n} bytes"


def read_bytes_capped(path: str | os.PathLike, *, limit: int = MAX_CONFIG_BYTES, what: str = "file") -> bytes:
    """The bytes of a regular file of at most `limit` bytes; BadInput otherwise. Never blocks on a FIFO
    (opened non-blocking, then refused by its type) and never reads more than limit + 1 bytes."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise BadInput(f"{excerpt(path)}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{excerpt(path)}: is a directory, not a {what}") from None
    except OSError as exc:
        raise BadInput(f"{excerpt(path)}: cannot be read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        if kind is not None:
            raise BadInput(f"{excerpt(path)}: is {kind}, not a {what}")
        if st.st_size > limit:
            raise BadInput(f"{excerpt(path)}: {_size(st.st_size)} is more than a {what} can be ({_size(limit)})")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(MIB, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise BadInput(f"{excerpt(path)}: cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if got > limit:  # it grew while being read (or st_size lied, as in /proc)
        raise BadInput(f"{excerpt(path)}: more than a {what} can be ({_size(limit)})")
    return b"".join(chunks)


def read_text_capped(path: str | os.PathLike, *, limit: int = MAX_CONFIG_BYTES, what: str = "file") -> str:
    """read_bytes_capped, decoded as UTF-8 (a BOM is dropped); BadInput when it is not UTF-8 text."""
    data = read_bytes_capped(path, limit=limit, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{excerpt(path)}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})") from None


def read_head_bytes(path: str | os.PathLike, limit: int) -> bytes | None:
    """The first `limit` bytes of a file rocmcheck chose to look at itself (a PCI config space, a script's `#!`
    line); None when it is missing, unreadable or not a regular file (a FIFO is never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_head(path: str | os.PathLike, limit: int) -> str | None:
    """The first `limit` characters of a file rocmcheck chose to look at itself (/proc, /sys, a ROCm install's
    version files), decoded leniently; None when it is missing, unreadable or not a regular file (a FIFO is
    never waited on). Files a person names go through read_text_capped instead."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    try:
        with os.fdopen(fd, encoding="utf-8", errors="replace") as fh:  # closes fd
            return fh.read(limit)
    except OSError:
        return None


def expand_user(path: str | os.PathLike) -> Path:
    """Path(path).expanduser(), with one line for a `~name` whose user does not exist here (Python raises
    RuntimeError "Could not determine home directory")."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = str(path)[1:].split("/", 1)[0]
        raise BadInput(f"{excerpt(path)}: there is no user {excerpt(user)!r} on this machine") from None


def check_target(path: str | os.PathLike, *, force: bool = False, flag: str = "--force") -> Path:
    """Where write_atomic would write, checked before any work is done: the folder exists and is writable, the
    target is not an existing file (unless force) nor a directory, FIFO or device. BadInput otherwise.
    A symbolic link is never followed: a new file is never created where a link points (a link planted as the
    output name, dangling or not, is refused), and with force the link itself is replaced by the file, its
    target left alone. Returns the path, unresolved."""
    if isinstance(path, str) and path.endswith(os.sep) and path.strip(os.sep):
        raise BadInput(f"cannot write {excerpt(path)}: it names a folder (ends in {os.sep}); name a file")
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # a loop or a non-folder in the path above it
        raise BadInput(f"cannot write {excerpt(path)}: {exc.strerror or exc}") from None
    if not os.path.isdir(folder):
        raise BadInput(f"cannot write {excerpt(path)}: {excerpt(folder)} is not a directory")
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            if not force:
                raise BadInput(f"not overwriting {excerpt(path)}: it is a symbolic link (to "
                               f"{excerpt(_link_target(path))}); add {flag} to replace the link itself")
        else:
            kind = _kind(st.st_mode)
            if kind is not None:
                raise BadInput(f"cannot write {excerpt(path)}: it is {kind}")
            if not force:
                raise BadInput(f"not overwriting {excerpt(path)}: it exists (add {flag} to replace it)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(f"cannot write {excerpt(path)}: {excerpt(folder)} is not writable")
    return path


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_atomic(path: str | os.PathLike, data: str | bytes, *, force: bool = False, flag: str = "--force") -> Path:
    """Write data to path all or nothing: a temporary file beside it, fsync, rename. An existing file is replaced
    only with force (BadInput otherwise) and keeps its permission bits; a new one gets the umask's. On any
    failure (ENOSPC, EFBIG, EACCES) the temporary file is removed, the old file is untouched and OSError is raised.
    Returns the path written."""
    target = check_target(path, force=force, flag=flag)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    # A regular file being replaced keeps its permission bits; a new file, or one that replaces a link, gets the
    # umask's (never the bits of whatever the link pointed to).
    mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if force:  # rename replaces the directory entry: a link there is replaced, its target untouched
            os.replace(tmp, target)
        else:  # link, not rename: a file (or a link) that appeared since the check is kept, and never followed
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise BadInput(f"{excerpt(target)} exists (use {flag} to replace it)") from None
            except OSError:  # a file system without hard links: the check above is all there is
                os.replace(tmp, target)
            else:
                os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself survives a crash only once the folder is synced; best effort
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    return target


def describe_write_error(path: str | os.PathLike, exc: OSError) -> str:
    """One line for a failed write (BadInput already is one)."""
    if isinstance(exc, BadInput):
        return str(exc)
    return f"cannot write {excerpt(path)}: {exc.strerror or exc}"
