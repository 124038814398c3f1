"""How a command for people runs under click: its program and ``--config`` from click's
context, :func:`answered`, which makes one function a command that fails in one line, as a
core verb does (``commands.protocol.run``), and :func:`with_progress` for long walks."""

from __future__ import annotations

import contextlib
import sys
from functools import wraps
from typing import TYPE_CHECKING, TypeVar

import click
from msgspec import Struct

from resource_extend.commands.protocol import Answer, Session, Verb, run

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from contextlib import AbstractContextManager

    from resource_extend.commands.program import Plugin


T = TypeVar("T")


def with_progress(
    items: Iterable[T], label: str, length: int | None = None
) -> AbstractContextManager[Iterable[T]]:
    """``items``, walked under click's progress bar on stderr when stderr is a terminal, and
    as they are when it is not (a pipe, a file, a log: nothing extra is printed). For the
    commands people run over many nodes; core's verbs print nothing but their answer."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(items)
    bar: AbstractContextManager[Iterable[T]] = click.progressbar(
        items, length=length, label=label, file=sys.stderr
    )
    return bar


def click_config() -> str | None:
    """The ``--config`` given to the click CLI, for the commands it runs."""
    config: str | None = click.get_current_context().find_root().params.get("config")
    return config


def click_plugin(ctx: click.Context | None = None) -> Plugin:
    """The program the click CLI runs as (``commands.cli.main`` puts it in the root context):
    of ``ctx``, or of the command running now."""
    plugin: Plugin = (ctx or click.get_current_context()).find_root().obj
    return plugin


def click_session() -> Session[Struct]:
    """A session for the command the click CLI runs: its program and its ``--config``."""
    session: Session[Struct] = Session(click_plugin(), click_config())
    return session


def answered(handler: Callable[..., Answer]) -> Callable[..., None]:
    """A command for people as one function: ``handler(session, **its options)`` returns the
    answer, a string (printed as it is) or JSON; a failure is one line naming the command
    by its click name, like a core verb's."""

    @wraps(handler)
    def command(**options: object) -> None:
        name = click.get_current_context().command.name or handler.__name__
        run(name, lambda session: handler(session, **options), click_session(), text=None)

    return command


def verb_command(verb: Verb) -> click.Command:
    """A core verb as a click command, for ``--help`` and the CLI: its help is its handler's
    docstring, and its epilog its kind's word on requests."""
    return click.Command(
        verb.name,
        callback=lambda: verb(click_session()),
        help=verb.handler.__doc__,
        epilog=verb.epilog if verb.request_type is not None else None,
    )
