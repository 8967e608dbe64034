"""Template filters for text about runs that depends on who reads it, or on when it is read."""

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timeuntil

from workbench.runs.web.learning import last_validation_notes

register = template.Library()


@register.filter
def validation_notes(run) -> list[str]:
    """`{{ run|validation_notes }}`: what the trainer said of the run's last validation (a network
    that has found or separated nothing yet), for its page, beside the numbers."""
    return last_validation_notes(run)


@register.filter
def wait_reason_for(run, viewer) -> str:
    """`{{ run|wait_reason_for:user }}`: Run.wait_reason_for, which hides holders the viewer may not see."""
    return run.wait_reason_for(viewer)


@register.filter
def starts_in(moment: datetime) -> str:
    """`{{ run.estimated_start|starts_in }}`: "in 12 minutes", or "within a minute" when it is
    that close or already due (Django's timeuntil says "0 minutes" then, which reads as a fault)."""
    if moment - timezone.now() < timedelta(minutes=1):
        return "within a minute"
    return f"in {timeuntil(moment)}"


@register.filter
def plain_number(value) -> str:
    """`{{ settings.epochs|plain_number }}`: 3.0 as "3", 2.5 as "2.5" (the config keeps epochs as
    floats; "3.0 epochs" reads like a measurement)."""
    return f"{value:g}" if isinstance(value, float) else str(value)
