"""How a refusal states what it refuses: numbers plainly, long values cut, and the error that
names the field. One home for the trainer's, the form's and the API's messages (trainer.config
re-exports them, where callers have always imported them from)."""

from __future__ import annotations

import decimal
import math
from typing import Any


def plain_number(value: float) -> str:
    """A number as a message shows it: 1048576, 0.05, 0.0001, never 1.04858e+06 or 1e-04.

    Every refusal that names a limit or a value formats it here (the trainer's, the form's, the API's).
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return repr(value)
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    text = f"{value:.6g}"
    if "e" in text:  # small or huge: written out, without the exponent
        text = format(decimal.Decimal(text), "f")
    return text


class ConfigError(ValueError):
    """A config value is invalid. `field` names it (dotted: "solver.base_lr") so that callers
    across the process boundary (the workbench's validators) need not parse the text; str() reads
    "field: message" as before, for the trainer's own command line and logs."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def __reduce__(self):  # keeps `field` when pickled (DDP spawn, multiprocessing)
        return (_config_error, (self.message, self.field))


def _config_error(message: str, field: str | None) -> ConfigError:
    return ConfigError(message, field=field)


def shown(value: Any) -> str:
    """A value as a refusal quotes it: numbers plainly, a 400-digit integer by its length and
    long text cut, so a message never repeats a megabyte that was sent."""
    if isinstance(value, bool):
        return "true" if value else "false"  # as JSON writes it: what an API client sent
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"a {len(str(abs(value)))}-digit number"
    if isinstance(value, float) and math.isfinite(value) and abs(value) >= 1e15:
        return f"{value:.3g}"
    if isinstance(value, int | float):
        return plain_number(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def nearest_multiple(value: int, of: int) -> int:
    """The multiple of `of` nearest to `value` (the larger one on a tie), at least `of`: the
    number a refusal suggests ("try 96")."""
    lower = max(of, value // of * of)
    return lower if value - lower < lower + of - value else lower + of
