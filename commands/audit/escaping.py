"""Text as the pages write it (``page``, ``fleet_page``, ``chart``): HTML-escaped, and each
bidirectional control shown by its code point, ``[U+202E]``, never written raw nor as a
character reference. Raw, one reorders the rest of its line (the Trojan Source trick): a storage
volume's name, a host path, may hold one, and an auditor would read another size or name than
the record holds. Node names refuse control characters; a volume's is the host's."""

from __future__ import annotations

import html

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069), and their ends."""

_SHOWN = {ord(control): f"[U+{ord(control):04X}]" for control in BIDI_CONTROLS}


def escape(text: str, quote: bool = True) -> str:
    """``html.escape(text, quote)``, with every bidirectional control shown by its code point."""
    return html.escape(text.translate(_SHOWN), quote)
