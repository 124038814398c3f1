"""What a resource kind is called: the names the ledger and the shell derive from a kind's one
name (``gpu``). Imports nothing: core's thin calls name their program with it.

What a kind gives the ledger beyond its names is :mod:`ledger.model.contract`."""


def program_of(kind: str) -> str:
    """The program that serves ``kind``: ``resource-gpu``."""
    return f"resource-{kind}"
