"""The one error for bad input, shared by every app and adapted once each for forms, the API
and the commands (workbench/core/adapters.py: add_form_errors, drf_error, command_error)."""

from __future__ import annotations

from collections.abc import Iterator


class RequestError(ValueError):
    """Bad input as (field, message) pairs. `field` is the dotted path of what was sent
    ("gpus", "config.solver.base_lr"), None for the request as a whole; `message` says what is
    wrong and what is allowed, without repeating the field."""

    def __init__(self, field: str | None, message: str, *more: tuple[str | None, str]) -> None:
        self.errors: list[tuple[str | None, str]] = [(field, message), *more]
        super().__init__("; ".join(f"{key}: {text}" if key else text for key, text in self.by_request_field()))

    def __reduce__(self):  # keeps the pairs when pickled (a Celery result, a test worker)
        return (self.__class__, (*self.errors[0], *self.errors[1:]))

    @classmethod
    def of(cls, pairs: list[tuple[str | None, str]]) -> RequestError:
        first, *more = pairs
        return cls(*first, *more)

    @property
    def field(self) -> str | None:
        return self.errors[0][0]

    @property
    def message(self) -> str:
        return self.errors[0][1]

    def by_request_field(self) -> Iterator[tuple[str | None, str]]:
        """(top-level field, message led by the rest of the path): what an API client sent under
        that key. ("config.solver.base_lr", "-1 must...") -> ("config", "solver.base_lr: -1 must...")."""
        for field, message in self.errors:
            top, _, rest = (field or "").partition(".")
            yield top or None, f"{rest}: {message}" if rest else message


class NotAllowed(RequestError):
    """A field this requester may not set: the API answers 403, the form and the CLI name the
    field as for any refusal."""
