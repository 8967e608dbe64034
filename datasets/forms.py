"""The one form that validates a new dataset, for the wizard, the REST API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from datasets.archives import archive_kind
from datasets.building import archive_caps, datasets_root
from datasets.label_runner import CheckTookTooLong, label_preview_bounded
from datasets.labels.registry import format_choices, reads_label_files
from datasets.models import Dataset
from datasets.services import OPTION_FIELDS
from datasets.sources import SourceError, detect_kind, read_labels_file
from datasets.uploads import upload_path
from datasets.validators import (
    MAX_MIN_BOX_SIZE,
    MAX_PER_CLASS,
    parse_class_map,
    propose_task,
    validate_import_path,
    validate_label_source,
    validate_min_box_size,
    validate_percent_pair,
    validate_source_classes,
    validate_task_fields,
)
from trainer.protocol import TASKS

DEFAULTS = {
    "kind": "auto",
    "task": "auto",
    "format": "auto",
    "min_box_size": 0,
    "image_width": 256,
    "image_height": 256,
    "channels": 3,
    "resize_mode": "squash",
    "encoding": "png",
    "val_percent": 25,
    "test_percent": 0,
    "min_per_class": 2,
    "shuffle": "true",
    "seed": 0,
}
PATH_FIELDS = ("source_path", "labels_path", "image_folder", "val_path", "test_path")


def _as_plain_dict(data) -> dict:
    if hasattr(data, "getlist"):
        return {key: data.get(key) for key in data}
    return dict(data)


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=[("auto", "Detect automatically"), *Dataset.Kind.choices])
    # Detection and segmentation (issue 22): what the labels are for, their format, the class table
    # ({source class: new name, or null to ignore it}) and the smallest box kept (pixels).
    task = forms.ChoiceField(choices=[("auto", "Detect from the source"), *((t, t.capitalize()) for t in TASKS)])
    format = forms.ChoiceField(choices=[("auto", "Detect from the source"), *format_choices()])
    class_map = forms.CharField(required=False, max_length=100_000, label="Class table (JSON)")
    # A plain field: the number is parsed by the one bounded parser in clean_min_box_size (a
    # FloatField's float() raised OverflowError, a 500, on a 400-digit JSON integer).
    min_box_size = forms.Field(
        required=False, widget=forms.NumberInput(attrs={"min": 0, "max": MAX_MIN_BOX_SIZE, "step": "any"})
    )
    source_path = forms.CharField(required=False, max_length=4096, label="Path on the server")
    upload = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    labels_path = forms.CharField(required=False, max_length=4096, label="Labels file")
    image_folder = forms.CharField(required=False, max_length=4096, label="Image folder for relative paths")
    val_path = forms.CharField(required=False, max_length=4096, label="Separate validation folder/list/LMDB")
    test_path = forms.CharField(required=False, max_length=4096, label="Separate test folder/list/LMDB")
    image_width = forms.IntegerField(min_value=1, max_value=settings.MAX_IMAGE_SIDE)
    image_height = forms.IntegerField(min_value=1, max_value=settings.MAX_IMAGE_SIDE)
    channels = forms.TypedChoiceField(choices=[(3, "3 (colour)"), (1, "1 (grayscale)")], coerce=int)
    resize_mode = forms.ChoiceField(choices=Dataset.ResizeMode.choices)
    encoding = forms.ChoiceField(choices=Dataset.Encoding.choices)
    val_percent = forms.IntegerField(min_value=0, max_value=99)
    test_percent = forms.IntegerField(min_value=0, max_value=99)
    min_per_class = forms.IntegerField(min_value=1, max_value=MAX_PER_CLASS)
    max_per_class = forms.IntegerField(min_value=1, max_value=MAX_PER_CLASS, required=False)
    shuffle = forms.TypedChoiceField(
        choices=[("true", "Yes"), ("false", "No")], coerce=lambda v: v in (True, "true", "True", "1", "on")
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1)

    def __init__(self, data=None, *args, user=None, restrict_to_roots: bool = True, **kwargs):
        if data is not None:
            plain = _as_plain_dict(data)
            if isinstance(plain.get("shuffle"), bool):
                plain["shuffle"] = "true" if plain["shuffle"] else "false"
            if isinstance(plain.get("class_map"), dict):  # the API's JSON object, as its text
                plain["class_map"] = json.dumps(plain["class_map"])
            data = {**DEFAULTS, **{k: v for k, v in plain.items() if v is not None}}
        super().__init__(data, *args, initial=DEFAULTS, **kwargs)
        self.user = user
        self.restrict_to_roots = restrict_to_roots

    def _allowed_roots(self) -> list[Path] | None:
        """The import roots a source is held to where it is read; None for the CLI's own import."""
        return settings.IMPORT_ROOTS if self.restrict_to_roots else None

    def _path(self, field: str) -> Path | None:
        raw = self.cleaned_data.get(field)
        if not raw:
            return None
        return validate_import_path(raw, restrict_to_roots=self.restrict_to_roots)

    def clean_source_path(self):
        return self._path("source_path")

    def clean_labels_path(self):
        return self._path("labels_path")

    def clean_image_folder(self):
        return self._path("image_folder")

    def clean_val_path(self):
        return self._path("val_path")

    def clean_test_path(self):
        return self._path("test_path")

    def clean_class_map(self):
        return parse_class_map(self.cleaned_data.get("class_map"))

    def clean_min_box_size(self):
        return validate_min_box_size(self.cleaned_data.get("min_box_size"))

    def clean_upload(self):
        token = self.cleaned_data.get("upload")
        if not token:
            return None
        path = upload_path(user_id=self.user.pk, token=token) if self.user else None
        if path is None:
            raise ValidationError("This upload is unknown or has expired; upload the archive again.")
        return path

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        source, upload = cleaned.get("source_path"), cleaned.get("upload")
        if bool(source) == bool(upload):
            raise ValidationError("Give either an uploaded archive or a path on the server (one of them).")
        try:
            validate_percent_pair(cleaned["val_percent"], cleaned["test_percent"])
        except ValidationError as exc:
            self.add_error("val_percent", exc)
            return cleaned
        kind = cleaned["kind"]
        path = upload or source
        if upload:
            kind = "archive"
        elif kind == "auto":
            try:
                kind = detect_kind(path)
            except SourceError as exc:
                raise ValidationError(str(exc)) from None
        cleaned["kind"] = kind
        getattr(self, f"_check_{kind}")(path, cleaned)
        if not self.errors:
            self._check_task(path, cleaned)
        if not self.errors and not reads_label_files(cleaned["task"]):
            # The classes the build would find: {name: images}, None where unknown before it.
            cleaned["classes"] = validate_source_classes(kind=kind, path=path, min_per_class=cleaned["min_per_class"])
        return cleaned

    def _check_task(self, path: Path, cleaned) -> None:
        """The task (proposed from the source when not given), its format and options; a folder's
        labels are read and checked now (cleaned["label_check"]), an archive's at the build."""
        if cleaned["task"] == "auto":
            cleaned["task"], detected = propose_task(kind=cleaned["kind"], path=path)
            if cleaned["format"] == "auto":
                cleaned["format"] = detected
        errors = validate_task_fields(
            task=cleaned["task"], fmt=cleaned["format"], kind=cleaned["kind"], resize_mode=cleaned["resize_mode"]
        )
        for field, message in errors.items():
            self.add_error(field, message)
        cleaned["label_check"] = None
        if errors or not reads_label_files(cleaned["task"]) or cleaned["kind"] != "folder":
            return
        try:
            check = validate_label_source(
                task=cleaned["task"],
                fmt=cleaned["format"],
                path=path,
                class_map=cleaned.get("class_map"),
                min_box_size=cleaned.get("min_box_size") or 0.0,
                allowed_roots=self._allowed_roots(),
            )
        except ValidationError as exc:
            self.add_error("format", exc)
            return
        if isinstance(check, CheckTookTooLong):  # not refused: the build checks every file
            cleaned["label_check_unfinished"] = check
            return
        cleaned["label_check"], cleaned["format"] = check, check["format"]

    def _check_archive(self, path: Path, cleaned) -> None:
        if not path.is_file() or archive_kind(path) is None:
            raise ValidationError(f"{path.name}: not a zip or tar archive (checked by content, not by name).")

    def _check_folder(self, path: Path, cleaned) -> None:
        if not path.is_dir():
            raise ValidationError(f"{path}: a folder of class folders was expected, this is a file.")
        for field in ("val_path", "test_path"):
            if cleaned.get(field) and not cleaned[field].is_dir():
                self.add_error(field, f"{cleaned[field]}: not a folder.")

    def _check_textlist(self, path: Path, cleaned) -> None:
        if not path.is_file():
            raise ValidationError(f"{path}: a text list file was expected.")
        if not cleaned.get("labels_path"):
            self.add_error("labels_path", "A text list needs a labels file (one class name per line).")
            return
        try:
            read_labels_file(cleaned["labels_path"])
        except SourceError as exc:
            self.add_error("labels_path", str(exc))

    def _check_lmdb(self, path: Path, cleaned) -> None:
        for field, value in (
            ("source_path", path),
            ("val_path", cleaned.get("val_path")),
            ("test_path", cleaned.get("test_path")),
        ):
            if value is None:
                continue
            if not (value.is_dir() and (value / "data.mdb").is_file()) and value.name != "data.mdb":
                self.add_error(field, f"{value}: not an LMDB (no data.mdb).")
        if cleaned.get("labels_path"):
            try:
                read_labels_file(cleaned["labels_path"])
            except SourceError as exc:
                self.add_error("labels_path", str(exc))

    def _check_digits(self, path: Path, cleaned) -> None:
        if not (path / "train_db" / "data.mdb").is_file():
            raise ValidationError(f"{path}: not a DIGITS dataset folder (no train_db/data.mdb).")

    # The dataset_create arguments, once valid.
    def source(self) -> dict:
        c = self.cleaned_data
        source = {"restrict_to_roots": self.restrict_to_roots}
        if c.get("upload"):
            source["upload"] = self.data.get("upload")
            source["path"] = str(c["upload"])
            source["filename"] = c["upload"].name
        else:
            source["path"] = str(c["source_path"])
        if reads_label_files(c["task"]):
            source["format"] = c["format"]
            source["class_map"] = c.get("class_map")
            source["min_box_size"] = c.get("min_box_size") or 0.0
        for field, key in (
            ("labels_path", "labels"),
            ("image_folder", "image_folder"),
            ("val_path", "val"),
            ("test_path", "test"),
        ):
            if c.get(field):
                source[key] = str(c[field])
        return source

    def label_check(self) -> dict | None:
        """The label check of a valid detection or segmentation source (None for a classifier):
        a folder's was made by clean(); an archive is extracted (within the caps) and read now, in the
        bounded child of datasets.label_runner.
        Raises LabelError or ArchiveError naming the file (CheckTookTooLong: the check ran out of time)."""
        c = self.cleaned_data
        if not reads_label_files(c["task"]):
            return None
        if c.get("label_check_unfinished"):  # said once, not read again
            raise c["label_check_unfinished"]
        if c.get("label_check") is None:
            c["label_check"] = label_preview_bounded(
                kind=c["kind"],
                path=c["upload"] or c["source_path"],
                task=c["task"],
                fmt=c["format"],
                class_map=c.get("class_map"),
                min_box_size=c.get("min_box_size") or 0.0,
                caps=archive_caps(),
                scratch=datasets_root(),
                display_name=c["upload"].name if c.get("upload") else None,
                allowed_roots=self._allowed_roots(),
            )
        return c["label_check"]

    def options(self) -> dict:
        return {field: self.cleaned_data[field] for field in OPTION_FIELDS}
