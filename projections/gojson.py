"""JSON text in the bytes Go's ``encoding/json`` writes it, where msgspec writes it otherwise.

Go's ``json.Marshal`` makes strings safe to embed in HTML: ``<``, ``>`` and ``&`` become
``\\u003c``, ``\\u003e`` and ``\\u0026``, and the line and paragraph separators U+2028 and U+2029
``\\u2028`` and ``\\u2029``. msgspec writes them as they are. A node record the upstream plugin
can write too carries Go's bytes, so the two plugins' records stay byte-identical whatever a
product, path or node is called. The characters can only stand inside strings in JSON text, so
replacing them in the encoded bytes changes no structure and no value.
"""

from __future__ import annotations

_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def go_escaped(encoded: bytes) -> bytes:
    """``encoded`` (JSON text) with the characters Go escapes in strings escaped as Go does."""
    for plain, escaped in _GO_ESCAPES:
        if plain in encoded:
            encoded = encoded.replace(plain, escaped)
    return encoded
