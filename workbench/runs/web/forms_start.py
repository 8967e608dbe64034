"""The new-run form's "Start from": from scratch, the weights store (`weights:<id>`), a run, an
upload or the weights a cloned run started from, each checked by the one rule of
validators.check_pretrained (the API's and the CLI's too), and the fine-tuning settings."""

from __future__ import annotations

from django import forms

from trainer.config import plain_number
from workbench.core.adapters import add_form_errors
from workbench.core.errors import RequestError
from workbench.runs.models import Run
from workbench.runs.pretrained import checkpoint_epoch, checkpoint_of
from workbench.runs.validators import check_pretrained, trainer_number
from workbench.weights.selectors import weights_for_networks
from workbench.weights.uploads import MAX_UPLOAD_BYTES

START_CHOICES = [
    ("scratch", "From scratch (random weights)"),
    ("weights", "From pretrained weights (ImageNet and the like, from the weights store)"),
    ("run", "From a previous run's weights (fine-tune)"),
    ("upload", "From an uploaded state_dict (.pt)"),
    ("path", "From the weights the cloned run started from"),
]


def runs_with_weights(user) -> list[Run]:
    """The runs one may start from: finished ones first (newest first), then those still going,
    whose weights are a snapshot of a model still training."""
    runs = Run.objects.visible_to(user).select_related("dataset").order_by("-created_at")
    found = [run for run in runs[:300] if checkpoint_of(run, "best") is not None]
    return sorted(found, key=lambda run: not run.is_finished)


def weights_reference(run: Run) -> str:
    """A finished run gives its best checkpoint; one still going its latest snapshot (its best so
    far may be an early one, and the choice says which it is)."""
    return f"run:{run.pk}" if run.is_finished else f"run:{run.pk}:last"


def previous_run_label(run: Run) -> str:
    which = "best" if run.is_finished else "last"
    epoch = checkpoint_epoch(run, which)
    at = f", epoch {plain_number(round(epoch, 2))}" if epoch is not None else ""
    if run.is_finished:
        return f"#{run.pk} {run.name} ({run.network}, {run.state}: best checkpoint{at})"
    return f"#{run.pk} {run.name} ({run.network}, {run.state} — its latest snapshot{at})"


class StartFromForm(forms.Form):
    """The fields and checks of "Start from"; RunForm sets `user` before `_offer_starts`."""

    start_from = forms.ChoiceField(choices=START_CHOICES, initial="scratch", widget=forms.RadioSelect)
    previous_run = forms.ChoiceField(choices=(), required=False)
    pretrained_file = forms.FileField(required=False)
    stored_weights = forms.ChoiceField(choices=(), required=False, label="Pretrained weights")
    freeze_backbone_epochs = trainer_number(
        "freeze_backbone_epochs",
        required=False,
        label="Freeze the backbone for (epochs)",
        help_text="only the new head learns at first; the loaded layers are the backbone",
    )
    backbone_lr_mult = trainer_number(
        "backbone_lr_mult",
        required=False,
        label="Backbone learning-rate multiplier",
        help_text="the backbone trains at base lr × this",
    )
    freeze_bn = forms.BooleanField(required=False, label="Keep BatchNorm in eval mode (its pretrained statistics)")
    # Clone: the reference (upload:<id>, run:<id>) the cloned run started from, never a path; the
    # field keeps its old name for the page's script.
    pretrained_path = forms.CharField(required=False, widget=forms.HiddenInput)

    def _offer_starts(self, *, preview: bool) -> None:
        # The live previews clean a few fields on every keystroke: they skip the checkpoint scan.
        self.previous_runs = {} if preview else {str(run.pk): run for run in runs_with_weights(self.user)}
        self.fields["previous_run"].choices = [("", "—")] + [
            (pk, previous_run_label(run)) for pk, run in self.previous_runs.items()
        ]
        # The store's weights of every network; the page shows those of the chosen one.
        self.stored = {str(row.pk): row for row in weights_for_networks()}
        self.fields["stored_weights"].choices = [("", "—")] + [
            (pk, f"{row.network}: {row.label}") for pk, row in self.stored.items()
        ]

    def clean_previous_run(self):
        value = self.cleaned_data["previous_run"]
        if value and value not in self.previous_runs:
            raise forms.ValidationError("Choose one of your runs that has a checkpoint.")
        return self.previous_runs.get(value)

    def clean_pretrained_file(self):
        upload = self.cleaned_data.get("pretrained_file")
        if upload and upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"{upload.name} is {upload.size} bytes, over the {MAX_UPLOAD_BYTES} limit.")
        return upload

    def clean_pretrained_path(self):
        return self.cleaned_data["pretrained_path"].strip()

    def _check_weights(self, data) -> None:
        """Sets `pretrained_reference` (the upload's is made on submit) after the one rule of
        validators.check_pretrained, which the API and the CLI go through as well."""
        start = data["start_from"]
        self.pretrained_reference = None
        if start == "run":
            run = data.get("previous_run")
            if run is None:
                self.add_error("previous_run", "Choose the run whose weights to start from.")
                return
            self._check_reference(weights_reference(run), data, field="previous_run")
        elif start == "weights":
            if data.get("stored_weights") not in self.stored:
                self.add_error("stored_weights", "Choose the pretrained weights to start from.")
                return
            self._check_reference(f"weights:{data['stored_weights']}", data, field="stored_weights")
        elif start == "upload" and not data.get("pretrained_file"):
            self.add_error("pretrained_file", "Choose a .pt file holding a state_dict.")
        elif start == "path":
            if not data.get("pretrained_path"):
                self.add_error("start_from", "The cloned run did not start from saved weights; choose another option.")
                return
            self._check_reference(data["pretrained_path"], data, field="start_from")

    def _check_reference(self, reference: str, data, *, field: str) -> None:
        try:
            check_pretrained(reference, owner=self.user, network=data["network"])
        except RequestError as error:
            add_form_errors(self, error, field_of={"pretrained": field})
            return
        self.pretrained_reference = reference
