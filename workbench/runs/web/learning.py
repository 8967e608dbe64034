"""What the trainer said of a run's last validation, for its page's header: the task's evaluator
(trainer/tasks/) logs why its numbers are what they are, "no box scored above 0.05 on the
validation images: the detector has not found anything yet", "every validation pixel is predicted
as class 0", and those words were only in the log while the header read "Best mAP 0.02%". The page
opens with them; static/runs/validation_notes.js keeps them current, by the same rule, as it trains."""

from __future__ import annotations

from trainer import protocol
from workbench.runs.models import Run


def last_validation_notes(run: Run) -> list[str]:
    """The warnings logged between the run's last training metrics and its last validation: what
    the evaluation said (trainer/engine.py evaluate logs its notes just before the validation
    event), each once (a run with a weights' average is evaluated twice)."""
    events = run.events.order_by("-seq")
    last = events.filter(kind=protocol.VALIDATION).values_list("seq", flat=True).first()
    if last is None:
        return []
    since = events.filter(kind=protocol.METRICS, seq__lt=last).values_list("seq", flat=True).first() or 0
    lines = (
        run.events.filter(kind=protocol.LOG, seq__gt=since, seq__lt=last, data__level="warning")
        .order_by("seq")
        .values_list("data__line", flat=True)
    )
    return list(dict.fromkeys(line for line in lines if isinstance(line, str) and line))
