"""A call's heartbeat: a thread of a call process (``call_process``) that tells the client the
call is alive while it runs. The helper's own process runs no thread, so that forking it is
safe; each call process starts this one with its first call and keeps it for the next."""

from __future__ import annotations

import os
import socket
import threading
import time

from resource_extend.commands.resident import client as resident


class Heartbeat:
    """A call's frames to its client, and a ``K`` every ``resident.HEARTBEAT`` seconds between
    them while it runs: the client kills a call for silence, never for taking long.

    Its thread ticks on its own clock, a call or none, and beats when a call is running: a call
    starts and ends without waking it (a wake-up, with the interpreter's lock passed to the
    thread and back, cost each call about 0.1 ms; a tick of an idle call process costs a few
    microseconds twice a second)."""

    def __init__(self) -> None:
        self._connection: socket.socket | None = None
        """The running call's connection; ``None`` between calls (no beats)."""
        self._lock = threading.Lock()
        """Held for each frame sent, so that a beat never falls in the middle of one."""
        self._thread: threading.Thread | None = None

    def start(self, connection: socket.socket, taken: bytes) -> None:
        """Send ``taken`` (the call's first frame: nothing may come before it), then beat on
        ``connection`` until stopped."""
        with self._lock:
            connection.sendall(taken)
            self._connection = connection
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()

    def send(self, frame: bytes) -> None:
        """A frame of the running call (never in the middle of a beat)."""
        with self._lock:
            assert self._connection is not None
            self._connection.sendall(frame)

    def stop(self) -> None:
        """No more beats: the answer follows, or nothing will."""
        with self._lock:
            self._connection = None

    def _beat(self) -> None:
        while True:
            time.sleep(resident.HEARTBEAT)
            with self._lock:
                if self._connection is None:
                    continue
                try:
                    self._connection.sendall(b"K\n")
                except OSError:  # the client is gone: nobody will hear this call's answer
                    os._exit(1)
