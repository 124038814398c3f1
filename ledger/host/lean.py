"""The little of ``os`` a core call's thin client needs, from ``posix`` alone.

A call the resident helper answers runs nothing but the thin client, in a Python started
without ``site`` (by the launcher ``install`` writes); importing ``os`` would cost it about
1 ms of its total (``os.environ`` is a mapping, which loads the collections' abstract
classes). These do what ``os`` would, for this client's needs: reading the environment, making
a path absolute, asking whether a file is a regular file, encoding a path for a socket frame.
"""

import posix
import sys

ENCODING = sys.getfilesystemencoding()
"""How paths and environment values are bytes (``os.fsencode``'s)."""


def getenv(name: str) -> str | None:
    """``os.environ.get(name)``: from ``os.environ`` when something has loaded ``os`` (a
    change made through it is not seen in ``posix.environ``), else from the process's own."""
    os = sys.modules.get("os")
    if os is not None:
        value: str | None = os.environ.get(name)
        return value
    raw = posix.environ.get(name.encode(ENCODING, "surrogateescape"))
    return None if raw is None else raw.decode(ENCODING, "surrogateescape")


def absolute(path: str) -> str:
    """``os.path.abspath(path)``: from the working directory, ``.`` and ``..`` taken out as
    written (a ``//`` at the start is read as ``/``)."""
    if not path.startswith("/"):
        path = f"{posix.getcwd()}/{path}"
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def is_file(path: str) -> bool:
    """``os.path.isfile(path)``: a regular file, links followed."""
    try:
        return posix.stat(path).st_mode & 0o170000 == 0o100000
    except (OSError, ValueError):
        return False


def fsencode(path: str) -> bytes:
    """``os.fsencode(path)``."""
    return path.encode(ENCODING, "surrogateescape")
