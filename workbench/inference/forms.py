from __future__ import annotations

from django import forms

from workbench.inference.models import InferenceJob


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleImageField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput(attrs={"multiple": True, "accept": "image/*"}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class JobForm(forms.Form):
    """Classify many / test: the checkpoint, then the images (an archive or several files)."""

    checkpoint = forms.ChoiceField(choices=())
    source = forms.ChoiceField(choices=InferenceJob.Source.choices, initial=InferenceJob.Source.VAL, required=False)
    archive = forms.FileField(
        required=False, help_text="zip or tar of images (class folders or a list file for a test)"
    )
    images = MultipleImageField(required=False, help_text="or pick image files")

    def __init__(self, *args, checkpoints: list[dict], kind: str, splits: dict, uploads: bool = True, **kwargs):
        """`uploads`: a test may be on uploaded images (a classifier's: class folders or a list)."""
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.fields["checkpoint"].choices = [(c["value"], c["label"]) for c in checkpoints]
        if kind != InferenceJob.Kind.TEST:  # classify, detect or segment many: uploaded images only
            del self.fields["source"]
        else:
            choices = [
                (value, label)
                for value, label in InferenceJob.Source.choices
                if (value == "upload" and uploads) or (value != "upload" and (splits.get(value) or {}).get("count"))
            ]
            self.fields["source"].choices = choices
            self.fields["source"].initial = choices[0][0] if choices else None
            if not uploads:
                del self.fields["archive"], self.fields["images"]

    def clean(self):
        data = super().clean()
        source = data.get("source") or InferenceJob.Source.UPLOAD
        data["source"] = source
        if source == InferenceJob.Source.UPLOAD and "archive" not in self.fields:
            self.add_error("source", "Choose the validation or test split (this dataset has neither).")
        elif source == InferenceJob.Source.UPLOAD:
            if not data.get("archive") and not data.get("images"):
                self.add_error("archive", "Upload an archive (zip, tar) or pick one or more images.")
            elif data.get("archive") and data.get("images"):
                self.add_error("archive", "Upload either an archive or images, not both.")
        return data
