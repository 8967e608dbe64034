"""The one way the server writes numbers for people: `{% load numbers %}`, then
`{{ value|percent }}`, `|loss`, `|metric:"top1"`, `|bytes_size`, `|duration`, `|datetime_text`,
`|whole`, `|count`.

static/workbench/format.js is its twin in the browser, rule for rule, so a page drawn here and
updated by its script reads the same (the run header and the checkpoint menus, the classify bar
and its table). The rules:
- percentages: a fraction as "97.75%", two decimals everywhere;
- losses: four decimals ("0.1234"); below 0.001, three significant digits ("1.23e-4");
- sizes: binary units, as the GPUs report memory (B, KiB, MiB, GiB, TiB; one decimal);
- durations: "12 s", "3 min 5 s", "1 h 2 min";
- dates: "2026-12-02 14:03:09" in the current time zone;
- whole numbers: "12,345"; large counts (parameters): "11.2 M", "61.5 k";
- rates (images/s): whole from 100 ("12,345"), three significant digits below ("12.3", "0.3");
- a search's settings: four significant digits ("0.0001235", "1.235e-7"), whole ones whole.
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils import timezone

from trainer.early_stop import METRIC_WORDS
from trainer.protocol import METRIC_DIRECTION

register = template.Library()

DASH = "–"
# Metrics that are fractions (shown as percentages): every metric that goes up as a model learns
# (accuracies, mAP, IoU, Dice), and a few shares; the others are losses.
FRACTIONS = frozenset(
    {name for name, direction in METRIC_DIRECTION.items() if direction == "max"}
    | {"accuracy", "data_wait_share", "same_top1"}
)
UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
# The metrics' names in the pages' words, as the trainer's messages name them.
METRIC_NAMES = {**METRIC_WORDS, "val_loss": "val. loss", "loss": "loss"}


def _fixed(number: float, digits: int) -> str:
    """`digits` decimals with JavaScript's toFixed rounding (a half goes up; Python's format sends
    it to even: 3.25 is 3.2 there and 3.3 in the browser), so both sides write the same."""
    return str(Decimal(number).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@register.filter
def percent(fraction) -> str:
    value = _number(fraction)
    return DASH if value is None else f"{_fixed(100 * value, 2)}%"


@register.filter
def loss(value) -> str:
    number = _number(value)
    if number is None:
        return DASH
    if number == 0 or abs(number) >= 0.001:
        return _fixed(number, 4)
    mantissa, exponent = f"{number:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"  # 1.23e-4, as JavaScript's toExponential writes it


@register.filter
def metric(value, name: str) -> str:
    """`{{ value|metric:"top1" }}`: a fraction as a percentage, any other metric as a loss."""
    return percent(value) if name in FRACTIONS else loss(value)


@register.filter
def metric_name(name: str) -> str:
    return METRIC_NAMES.get(name, name)


@register.filter
def bytes_size(value) -> str:
    number = _number(value)
    if number is None:
        return DASH
    unit = 0
    while abs(number) >= 1024 and unit < len(UNITS) - 1:
        number /= 1024
        unit += 1
    return f"{_fixed(number, 1)} {UNITS[unit]}" if unit else f"{math.floor(number + 0.5)} B"


@register.filter
def duration(seconds) -> str:
    number = _number(seconds)
    if number is None:
        return DASH
    s = max(0, math.floor(number + 0.5))  # JavaScript's Math.round: halves up, not to even
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


@register.filter
def whole(value) -> str:
    """A count or a rate as a whole number with thousands separators: 12,345 (images/s)."""
    number = _number(value)
    return DASH if number is None else f"{int(Decimal(number).quantize(Decimal(1), rounding=ROUND_HALF_UP)):,}"


@register.filter
def rate(value) -> str:
    """A rate (images/s): whole from 100, "12,345"; three significant digits below, "12.3", "0.3"
    (a slow CPU run's 0.3 images/s read "0 images/s" beside its chart)."""
    number = _number(value)
    if number is None:
        return DASH
    if abs(number) >= 100 or number == 0:
        return whole(number)
    exact = Decimal(number)  # half up on the exact value, as JavaScript's toPrecision rounds
    rounded = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 2), rounding=ROUND_HALF_UP)
    return format(rounded.normalize(), "f")


@register.filter
def count(value) -> str:
    """A large count short: 11.2 M, 61.5 k (parameters); two decimals under 10 M (1.23 M)."""
    number = _number(value)
    if number is None:
        return DASH
    if abs(number) >= 1e6:
        return f"{_fixed(number / 1e6, 1 if abs(number) >= 1e7 else 2)} M"
    if abs(number) >= 1e3:
        return f"{_fixed(number / 1e3, 1)} k"
    return str(round(number))


@register.filter
def setting(value) -> str:
    """`{{ value|setting }}`: a value a search chose (lr=0.0001235, batch_size=64, optimizer=sgd),
    written as JavaScript's String(Number(value.toPrecision(4))) writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, int | float):
        return str(value)
    number = _number(value)
    if number is None:
        return DASH
    if number.is_integer() and abs(number) < 1e21:
        return str(int(number))
    rounded = repr(float(f"{number:.4g}"))
    if abs(float(rounded)) < 1e-6:  # JavaScript's exponent form: 1.235e-7
        mantissa, exponent = rounded.split("e")
        return f"{mantissa}e{int(exponent)}"
    return format(Decimal(rounded), "f")


@register.filter
def datetime_text(moment: datetime | None) -> str:
    if moment is None:
        return DASH
    if timezone.is_aware(moment):
        moment = timezone.localtime(moment)
    return moment.strftime("%Y-%m-%d %H:%M:%S")
