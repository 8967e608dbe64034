"""The one parser of numbers that come from users: a form field, a query parameter, a JSON value in
an API body or in a label file. Every such number goes through `bounded_number`.

Why one home: Python's own conversions fail in ways a caller does not expect. `float(10**400)`
raises OverflowError (a 500 where ValueError was caught); `int("9" * 5000)` raises ValueError only
after a quadratic conversion; JSON's `Infinity`, `NaN` and `1e999` are floats that pass every
`isinstance(v, float)` check and then poison a sum, a box or a polygon; a 400-digit id passes
`int()` and overflows the database's 64-bit column. Here a number is refused by its size before any
conversion, must be finite, and must lie in the caller's range; the error names the field.

No Django here: the label readers, which run in a child process without Django, use it too.
"""

from __future__ import annotations

import math

# Longer text is no number a person meant (a float's 17 significant digits and an exponent fit
# easily); refusing it first keeps int()'s quadratic decimal conversion off huge strings.
MAX_NUMBER_TEXT = 40
# The largest integer a database id column holds (SQLite and PostgreSQL bigint).
MAX_ID = 2**63 - 1


class NumberError(ValueError):
    """A user's number that is not one, not finite or out of range; the message names the field."""


def bounded_number(value, *, field: str, low: float, high: float, integer: bool = False) -> float | int:
    """`value` (an int, a float or its text) as a finite float (an int with `integer`) within
    low..high; NumberError names `field` and the range otherwise. Booleans are no numbers (JSON's
    true is not 1)."""
    number = _as_number(value, field=field, integer=integer)
    if not low <= number <= high:
        raise NumberError(f"{field} must be {_range_text(low, high, integer)}, not {_shown(value)}")
    return number


def _as_number(value, *, field: str, integer: bool) -> float | int:
    kind = "a whole number" if integer else "a number"
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > MAX_NUMBER_TEXT:
            raise NumberError(f"{field} must be {kind}, not {_shown(value)}")
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise NumberError(f"{field} must be {kind}, not {_shown(text)}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NumberError(f"{field} must be {kind}, not {_shown(value)}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NumberError(f"{field} must be a finite number, not {value}")
        if integer and not value.is_integer():
            raise NumberError(f"{field} must be {kind}, not {value:g}")
        return int(value) if integer else value
    # An int: compared as it is, since float() of a huge int raises OverflowError.
    return value if integer else _int_as_float(value)


def _int_as_float(value: int) -> float:
    """A float of `value`, or infinity when it has none (its range check then refuses it)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _range_text(low: float, high: float, integer: bool) -> str:
    kind = "a whole number" if integer else "a number"
    return f"{kind} from {_bound(low)} to {_bound(high)}"


def _bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _shown(value) -> str:
    """The value as the message shows it: never thousands of digits back to the user."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**MAX_NUMBER_TEXT:
        return f"a number of more than {MAX_NUMBER_TEXT} digits"
    if value is not None and not isinstance(value, str | int | float):
        # A list or an object from JSON is named, not printed: str() of it walks it all first.
        return f"a {type(value).__name__}"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_NUMBER_TEXT else text[:MAX_NUMBER_TEXT] + "..."
