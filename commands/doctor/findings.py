"""``doctor``'s findings: what each check returns, and how a check that raised becomes one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import msgspec

from resource_extend.commands.program import debugging
from resource_extend.ledger.model.errors import PluginError

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

Status = Literal["ok", "warn", "fail"]


class Finding(msgspec.Struct, frozen=True):
    """One thing doctor looked at: how it stands, what it saw, and what to do about it."""

    check: str
    status: Status
    message: str
    fix: str = ""
    """What to run or change; empty when the finding is ok."""

    def filled(self, plugin: Plugin) -> Finding:
        """The finding as ``program`` says it: its ``{prog}``, ``{config}`` and so on filled
        (checks are written once for both programs)."""
        return Finding(
            self.check, self.status, plugin.own_words(self.message), plugin.own_words(self.fix)
        )


def ok(check: str, message: str) -> Finding:
    return Finding(check, "ok", message)


def warn(check: str, message: str, fix: str) -> Finding:
    return Finding(check, "warn", message, fix)


def fail(check: str, message: str, fix: str) -> Finding:
    return Finding(check, "fail", message, fix)


def not_checked(check: str, because: str) -> Finding:
    return warn(check, f"not checked: {because}", "fix the failure listed above, then run again")


def guarded(plugin: Plugin, check: str, run: Callable[[], list[Finding]]) -> list[Finding]:
    """``run``'s findings; a failure it raises is a finding too, so the next check runs."""
    try:
        return run()
    except PluginError as exc:
        reason = exc.reason
    except Exception as exc:  # a bug in a check must not hide the other findings
        if debugging(plugin):
            raise
        reason = f"internal error: {type(exc).__name__}: {exc}"
    return [fail(check, f"the check itself failed: {reason}", "{PROG}_DEBUG=1 shows its traceback")]
