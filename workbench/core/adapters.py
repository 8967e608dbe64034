"""The three ways a RequestError (workbench/core/errors.py) leaves the workbench: as a form's
errors, as a DRF 400 (or 403) body, as a management command's error. Every app that refuses input
adapts it here, so a refusal reads the same words in the browser, the API and the shell."""

from __future__ import annotations

from collections.abc import Mapping

from django import forms
from django.core.management.base import CommandError
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError

from workbench.core.errors import NotAllowed, RequestError


def add_form_errors(form: forms.Form, error: RequestError, *, field_of: Mapping[str, str] | None = None) -> None:
    """Each pair as an error of the form's field: `field_of` maps request paths (without the
    leading "config.") to form fields; a path the form has no field for is an error of the form."""
    for field, message in error.errors:
        path = (field or "").removeprefix("config.")
        name = (field_of or {}).get(path, path)
        form.add_error(name if name in form.fields else None, message)


def drf_error(error: RequestError) -> APIException:
    """A 400 body {field: [message, ...]} keyed by the top-level fields the client sent; an error
    of the whole request goes under "detail". A field the client may not set is a 403."""
    if isinstance(error, NotAllowed):
        return PermissionDenied(error.message)
    body: dict[str, list[str]] = {}
    for field, message in error.by_request_field():
        body.setdefault(field or "detail", []).append(message)
    return ValidationError(body)


def command_error(error: RequestError) -> CommandError:
    """`manage.py` commands print "field: message", the same words as the API."""
    return CommandError(str(error))


def page_message(error: RequestError) -> str:
    """A page's flash message (django.contrib.messages): the messages, without the fields a form
    would have put them beside."""
    return "; ".join(text for _, text in error.errors)
