"""Row ids as users send them (query strings, JSON, form fields): one rule for every app.

The databases hold a 64-bit integer; a larger id made SQLite raise OverflowError (a 500) and a
400-digit one was repeated in the message. An id outside the range is simply no row.
"""

from __future__ import annotations

from typing import Any

MAX_ID = 2**63 - 1


def parse_id(value: Any) -> int | None:
    """An int or decimal text naming a possible row (1..MAX_ID), else None; JSON true is not 1."""
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isdecimal() and text.isascii() and len(text) <= 19 else None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        return None
    return value
