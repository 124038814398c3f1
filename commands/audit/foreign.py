"""Keys under a kind's prefixes that name no node (``ledger.store.scans.Scans.foreign``): how
the commands that list nodes (``nodes``, ``verify --all``, ``compact --all``, ``archive``,
``doctor``) report them. None is read as a node; each is shown quoted, so that a terminal
escape, a line break or a byte that is not UTF-8 in someone else's key shows as its escape
and never reaches the auditor's terminal raw."""

from __future__ import annotations

import click

from resource_extend.commands.under_click import click_plugin
from resource_extend.ledger.store.scans import Scans

WHY = "(not UTF-8, or no node name: the plugins never write such a key)"


def foreign_keys(scans: Scans) -> list[str]:
    """The keys the listings so far met that name no node, each quoted as Python quotes a
    string, sorted."""
    return sorted(repr(key.decode(errors="backslashreplace")) for key in scans.foreign)


def report_foreign(scans: Scans, command: str) -> None:
    """One stderr line for each key a listing met that names no node; it is left as it is."""
    program = click_plugin().name
    for key in foreign_keys(scans):
        click.echo(f"{program} {command}: {key} names no node {WHY}; left as it is", err=True)
