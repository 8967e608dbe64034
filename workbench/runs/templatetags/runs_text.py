"""Template filters for text about runs that depends on who reads it."""

from django import template

register = template.Library()


@register.filter
def wait_reason_for(run, viewer) -> str:
    """`{{ run|wait_reason_for:user }}`: Run.wait_reason_for, which hides holders the viewer may not see."""
    return run.wait_reason_for(viewer)
