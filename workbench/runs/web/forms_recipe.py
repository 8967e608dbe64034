"""The new-run form's recipe: a preset (trainer/recipes.py, with its source) that fills the fields
below it, which stay editable, and the train-time augmentations, each saying where it runs
(the loader's CPU workers or the training device). The rules are the trainer's own (config
validation) and validators' (what the dataset's images allow), as for the API and the CLI."""

from __future__ import annotations

from django import forms

from trainer.recipes import AUTO_AUGMENTS, PRESETS, RECIPE_OFF, WHERE
from workbench.runs.validators import trainer_number

# Each recipe field -> its path in the trainer config (forms.CONFIG_PATH takes them in).
RECIPE_PATH = {
    "preset": "preset",
    "random_resized_crop": "data.random_resized_crop",
    "rrc_scale": "data.rrc_scale",
    "rrc_ratio": "data.rrc_ratio",
    "auto_augment": "data.auto_augment",
    "color_jitter": "data.color_jitter",
    "random_erasing": "data.random_erasing",
    "mixup_alpha": "data.mixup_alpha",
    "cutmix_alpha": "data.cutmix_alpha",
    "label_smoothing": "solver.label_smoothing",
    "ema_decay": "solver.ema_decay",
    "best_weights": "best_weights",
}
# The form's fields a preview of the augmentations reads (wizard_views.augment_preview).
PREVIEW_FIELDS = ("dataset", "crop_size", "random_flip", "vertical_flip") + tuple(
    name
    for name in RECIPE_PATH
    if name not in ("preset", "mixup_alpha", "cutmix_alpha", "label_smoothing", "ema_decay", "best_weights")
)

# The form's fields only a classification dataset takes: the presets (classifiers' recipes), the
# recipe augmentations and the random resized crop's own settings.
CLASSIFICATION_ONLY = ("preset", "rrc_scale", "rrc_ratio") + tuple(
    name for name, path in RECIPE_PATH.items() if path in RECIPE_OFF
)


def _runs(name: str) -> str:
    return WHERE[name]


def presets_for_page() -> dict:
    """What the page's script fills the fields from: {name: {label, source, note, fields}}, the
    fields by form field name, as the form shows values."""
    path_to_field = {path: name for name, path in RECIPE_PATH.items()}

    def fields(config: dict, prefix: str = "") -> dict:
        found = {}
        for key, value in config.items():
            if isinstance(value, dict):
                found.update(fields(value, f"{prefix}{key}."))
            else:
                found[path_to_field.get(f"{prefix}{key}", key)] = value
        return found

    return {
        name: {"label": p["label"], "source": p["source"], "note": p["note"], "fields": fields(p["config"])}
        for name, p in PRESETS.items()
    }


class RecipeForm(forms.Form):
    preset = forms.ChoiceField(
        choices=[("", "— none: the fields as they are —")] + [(name, p["label"]) for name, p in PRESETS.items()],
        required=False,
        help_text="fills the fields below (and the solver's); they stay editable",
    )
    random_resized_crop = forms.BooleanField(
        required=False,
        label="Random resized crop",
        help_text=f"to the crop size or the images' size; {_runs('random_resized_crop')}",
    )
    rrc_scale = forms.CharField(
        required=False, label="Crop area (share)", help_text="min, max share of the image's area"
    )
    rrc_ratio = forms.CharField(required=False, label="Crop aspect ratio", help_text="min, max width/height")
    auto_augment = forms.ChoiceField(
        choices=[(a, a) for a in AUTO_AUGMENTS],
        required=False,
        label="Augmentation policy",
        help_text=_runs("auto_augment"),
    )
    color_jitter = trainer_number(
        "data.color_jitter",
        required=False,
        label="Colour jitter",
        help_text=f"0: off; colour images; {_runs('color_jitter')}",
    )
    random_erasing = trainer_number(
        "data.random_erasing",
        required=False,
        label="Random erasing",
        help_text=f"probability; {_runs('random_erasing')}",
    )
    mixup_alpha = trainer_number(
        "data.mixup_alpha", required=False, label="Mixup alpha", help_text=f"0: off; {_runs('mixup_alpha')}"
    )
    cutmix_alpha = trainer_number(
        "data.cutmix_alpha", required=False, label="CutMix alpha", help_text="0: off; one of the two per batch"
    )
    label_smoothing = trainer_number(
        "solver.label_smoothing", required=False, label="Label smoothing", help_text=_runs("label_smoothing")
    )
    ema_decay = trainer_number(
        "solver.ema_decay", required=False, label="Weights' average (EMA) decay",
        help_text="0: off; validated beside the raw weights, and what is exported",
    )  # fmt: skip
    # Which weights the checkpoints hold with an average on (trainer.protocol.checkpoint_weights).
    best_weights = forms.ChoiceField(
        choices=[("", "the better of the two at each validation"), ("raw", "raw weights"), ("ema", "EMA")],
        required=False, label="Best checkpoint's weights",
        help_text="with an EMA decay: what best, inference and exports take",
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The presets and the recipe's augmentations are classification's (trainer/recipes.py
        # RECIPE_OFF, the validator's rule): new_run.js hides and disables them for another task.
        for name in CLASSIFICATION_ONLY:
            self.fields[name].widget.attrs["data-classification-only"] = ""
        # The loader's own augmentations say where they run too, beside the device's.
        for name in ("crop_size", "random_flip", "vertical_flip"):
            if name in self.fields:
                self.fields[name].help_text = _runs(name)

    def clean_preset(self):
        return self.cleaned_data["preset"] or None

    def clean_best_weights(self):  # empty: the trainer's rule picks at each validation
        return self.cleaned_data["best_weights"] or None

    def clean_auto_augment(self):  # not sent (an older page, a script): the trainer's default
        return self.cleaned_data["auto_augment"] or None

    def _pair(self, name: str) -> list[float] | None:
        text = self.cleaned_data[name].strip()
        if not text:
            return None
        try:
            values = [float(part) for part in text.replace(";", ",").split(",") if part.strip()]
        except ValueError:
            raise forms.ValidationError("Two numbers, separated by a comma: min, max.") from None
        if len(values) != 2:
            raise forms.ValidationError(f"Two numbers (min, max), not {len(values)}.")
        return values

    def clean_rrc_scale(self):
        return self._pair("rrc_scale")

    def clean_rrc_ratio(self):
        return self._pair("rrc_ratio")
