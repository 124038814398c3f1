"""The resident helper: a warm process that runs core's calls for one config file.

Started detached by a call that found none (``client.start``: Python isolated, the caller's
package taken by its path, then :func:`main`), it takes its socket in the runtime directory
(``claim``) unless a live helper already has it, loads everything a verb needs (``warm``), and
serves (``arbiter``): it forks *call processes* (``call_process``), which take the calls from
its socket themselves, one at a time each, run the verb exactly as ``resource-gpu VERB`` would,
and beat while it runs (``heartbeat``). Calls so run side by side, on every core, each warm,
and a stuck one can be killed alone. Its process title names the plugin and its config. The
wire conversation is described in ``commands.resident.client``.

Which process runs what: this module, ``claim`` and ``warm`` run in the helper's process as it
starts; ``arbiter`` is that process's loop from then on; ``call_process`` and ``heartbeat`` run
in each call process.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident.arbiter import Helper
from resource_extend.commands.resident.claim import claim
from resource_extend.ledger.host import rundir


def main(argv: list[str]) -> None:
    """``residentd KIND CONFIG``: serve the calls of KIND's program for the config file CONFIG;
    KIND is the module that defines the kind's ``PLUGIN`` (``Plugin.origin``). A name that is
    no such module (0.8.0's clients named the program) starts no helper: the call that asked
    goes on in its own process, and the next one starts the helper as this release names it."""
    kind, config_path = argv
    try:
        plugin = importlib.import_module(kind).PLUGIN
    except (ImportError, AttributeError):
        return
    program = plugin.name
    _set_title(f"{program} helper {config_path}")
    name = resident.socket_name(config_path)
    asked: list[int] = []  # a stop asked for before the helper serves: it stops at once
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, _: asked.append(signum))
    try:
        directory, path = rundir.open_private(program, create=True)
    except OSError:
        return
    claimed = claim(plugin, directory, name)
    if claimed is None:
        return
    listener, inode = claimed
    socket_path = os.path.join(path, name)
    helper = Helper(plugin, listener, directory, name, inode, config_path, socket_path)
    helper.serve(stopped=asked)


def _set_title(title: str) -> None:
    try:
        import setproctitle
    except ImportError:  # the title is for people; the helper works without it
        return
    setproctitle.setproctitle(title)


if __name__ == "__main__":
    main(sys.argv[1:])
