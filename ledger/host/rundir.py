"""The resident helper's runtime directory: private to this user, checked all the way up, and
used through a descriptor so that nothing can be swapped between the check and the use.

The directory is ``$XDG_RUNTIME_DIR/<program>-<uid>`` (``/tmp/<program>-<uid>`` when
that variable is unset, or names a place this user cannot trust). It is trusted, as ssh-agent
and gpg-agent trust theirs, when it is a real directory (not a link) owned by this user with no
access for anyone else, and every directory above it is owned by root or this user and is not
writable by others (``/tmp``'s sticky bit is fine: nobody may rename what they do not own
there). The walk opens each component relative to the one above with ``O_NOFOLLOW`` and checks
the opened descriptor, and sockets are then reached as ``/proc/self/fd/<fd>/<name>``, which is
the directory that was checked, whatever has been renamed since. Both ends also check peer
credentials on the socket (``SO_PEERCRED``): a helper answers only its own user, and a call
talks only to a helper of its own user.

Imports only ``posix``, ``sys`` and ``_socket`` (and ``ledger.host.lean``): the thin client of
every core call uses it, and ``os`` would cost that call about 1 ms (``errno`` is loaded only
where a link is met on the way).
"""

import _socket
import posix
import sys

from resource_extend.ledger.host.lean import getenv

DIR_FLAGS = posix.O_RDONLY | posix.O_DIRECTORY | posix.O_CLOEXEC
STICKY = 0o1000
FALLBACK_BASE = "/tmp"
"""Where the runtime directory lives when ``$XDG_RUNTIME_DIR`` is unset or untrusted."""


class Untrusted(OSError):
    """The runtime directory, or a directory above it, could be changed by another user."""


def directory_name(program: str) -> str:
    """The runtime directory of ``program`` (``resource-gpu``) for this user."""
    return f"{program}-{posix.getuid()}"


def bases() -> list[str]:
    """Where the runtime directory may live, in order of preference."""
    found = [getenv("XDG_RUNTIME_DIR") or "", FALLBACK_BASE]
    return [base for base in dict.fromkeys(found) if base.startswith("/")]


def open_private(program: str, *, create: bool) -> tuple[int, str]:
    """A descriptor of this user's runtime directory of ``program`` (``resource-gpu``), and
    its path; ``create`` makes it (mode 0700) when it is missing.

    The first base (``$XDG_RUNTIME_DIR``, then ``/tmp``) that exists and can be trusted is
    used; raises OSError (``Untrusted`` when another user could change what is found) when
    none can, or when the directory itself is missing and not to be made.
    """
    failure: OSError = Untrusted("no runtime directory base")
    for base in bases():
        try:
            fd, real = _open_base(base)
        except OSError as exc:
            failure = exc
            continue
        try:
            return _open_own(fd, real, program, create=create)
        finally:
            posix.close(fd)
    raise failure


def unwritable(program: str) -> str | None:
    """Why no helper of ``program`` can make its socket: the runtime directory a call would
    use, or the base it would be made in, is not writable by this user (a helper then never
    starts, and every call runs in its own process). None when it is, or when it is missing
    and can be made, or when no base can be trusted (:func:`open_private` says why)."""
    import os

    for base in bases():
        try:
            fd, real = _open_base(base)
        except OSError:
            continue
        os.close(fd)
        own = os.path.join(real, directory_name(program))
        place = own if os.path.isdir(own) else real
        if os.access(place, os.W_OK | os.X_OK):
            return None
        made = "" if place == own else f" ({directory_name(program)} would be made there)"
        return f"{place} exists but this user cannot write in it{made}"
    return None


def _open_base(base: str) -> tuple[int, str]:
    """The base directory, walked from ``/`` one checked component at a time, through no link:
    the base as written when it names no link and has no ``.``, ``..`` or ``//`` (it is then
    its own real path, and a core call needs no ``os`` to learn so), else its real path."""
    parts = base.rstrip("/").split("/")[1:]
    if all(part not in ("", ".", "..") for part in parts):
        try:
            return _walk(parts), "/" + "/".join(parts)
        except OSError as exc:
            import errno  # (only here: not on every core call's way)

            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):  # a link (O_NOFOLLOW) on the way
                raise
    import os.path

    real = os.path.realpath(base)
    return _walk([part for part in real.split("/") if part]), real


def _walk(parts: list[str]) -> int:
    """A descriptor of ``/`` + ``parts``, each directory on the way checked, no link followed."""
    fd = posix.open("/", DIR_FLAGS)
    try:
        _check_above(fd, "/")
        walked = ""
        for part in parts:
            below = posix.open(part, DIR_FLAGS | posix.O_NOFOLLOW, dir_fd=fd)
            posix.close(fd)
            fd = below
            walked += "/" + part
            _check_above(fd, walked)
    except BaseException:
        posix.close(fd)
        raise
    return fd


def _open_own(base: int, real: str, program: str, *, create: bool) -> tuple[int, str]:
    name = directory_name(program)
    if create:
        try:  # noqa: SIM105 (contextlib costs the thin client its import)
            posix.mkdir(name, 0o700, dir_fd=base)
        except FileExistsError:
            pass
    own = posix.open(name, DIR_FLAGS | posix.O_NOFOLLOW, dir_fd=base)
    path = f"{real.rstrip('/')}/{name}"
    stat = posix.fstat(own)
    if stat.st_uid != posix.getuid() or stat.st_mode & 0o077:
        posix.close(own)
        raise Untrusted(
            f"{path} is not private to this user (uid {stat.st_uid}, mode {stat.st_mode & 0o777:o})"
        )
    return own, path


def _check_above(fd: int, where: str) -> None:
    """A directory above ours: owned by root or us, and not open to others' renames."""
    stat = posix.fstat(fd)
    if stat.st_uid not in (0, posix.getuid()):
        raise Untrusted(f"{where} is owned by uid {stat.st_uid}")
    if stat.st_mode & 0o022 and not stat.st_mode & STICKY:
        raise Untrusted(f"{where} is writable by others")


def via(directory: int, name: str) -> str:
    """The path of ``name`` inside the opened directory, as the kernel resolves it now."""
    return f"/proc/self/fd/{directory}/{name}"


def peer(sock: _socket.socket) -> tuple[int, int]:
    """``(pid, uid)`` of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    pid = int.from_bytes(raw[0:4], sys.byteorder, signed=True)
    uid = int.from_bytes(raw[4:8], sys.byteorder)
    return pid, uid
