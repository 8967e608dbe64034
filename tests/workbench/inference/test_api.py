"""Classify one image and look inside the network over the API (the pages call the same)."""

from __future__ import annotations

import base64
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from tests.workbench.inference.conftest import val_images

pytestmark = pytest.mark.django_db


def png(array) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return SimpleUploadedFile("digit.png", buffer.getvalue(), content_type="image/png")


def test_it_classifies_an_image_with_top_k_and_shows_what_the_network_saw(owner_client, digits_run):
    images, labels = val_images(digits_run, 20)
    url = reverse("api-run-classify", args=[digits_run.pk])
    hits = 0
    for image, label in zip(images, labels, strict=True):
        body = owner_client.post(url, {"image": png(image)}).json()
        probabilities = [p["probability"] for p in body["predictions"]]
        assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True)
        assert 0 < sum(probabilities) <= 1.0001
        hits += body["predictions"][0]["label"] == str(label)
    assert hits >= 15
    seen = Image.open(io.BytesIO(base64.b64decode(body["preprocessed"].split(",", 1)[1])))
    assert seen.size == (8, 8) and seen.mode == "L"
    assert body["checkpoint"] == "best.pt" and body["preprocessing"]["input_shape"] == [1, 8, 8]
    body = owner_client.post(url, {"image": png(images[0]), "top_k": "2", "checkpoint": "last"}).json()
    assert len(body["predictions"]) == 2 and body["checkpoint"].startswith("step_")


def test_it_resizes_a_big_colour_photo_like_training_did(owner_client, digits_run):
    photo = Image.new("RGB", (64, 48), (250, 250, 250))
    buffer = io.BytesIO()
    photo.save(buffer, format="JPEG")
    body = owner_client.post(reverse("api-run-classify", args=[digits_run.pk]),
                             {"image": SimpleUploadedFile("photo.jpg", buffer.getvalue())}).json()  # fmt: skip
    assert len(body["predictions"]) == 5


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({}, "image", "upload an image file"),
        ({"image": SimpleUploadedFile("notes.png", b"hello")}, "image", "notes.png: not an image"),
        ({"image": SimpleUploadedFile("empty.png", b"")}, "image", "empty"),
        ({"top_k": "lots"}, "top_k", "'lots' is not a whole number"),
        ({"top_k": "0"}, "top_k", "must be between 1 and 100"),
        ({"checkpoint": "12345"}, "checkpoint", "has no checkpoint at step 12345"),
        # A file name the system refuses: OSError, a 500 with the run's folder in the log, before.
        ({"checkpoint": "9" * 400}, "checkpoint", "is not best, last or a step number"),
    ],
)
def test_it_names_the_problem_of_a_classify_request(owner_client, digits_run, data, field, message):
    if field in ("top_k", "checkpoint"):
        data = {**data, "image": png(val_images(digits_run, 1)[0][0])}
    response = owner_client.post(reverse("api-run-classify", args=[digits_run.pk]), data)
    assert response.status_code == 400
    assert message in " ".join(response.json()[field]), response.json()


def test_it_hides_other_users_runs_and_needs_a_login(client, other_user, digits_run):
    url = reverse("api-run-classify", args=[digits_run.pk])
    assert client.post(url, {}).status_code == 401
    client.force_login(other_user)
    assert client.post(url, {"image": png(val_images(digits_run, 1)[0][0])}).status_code == 404


def test_it_lists_the_checkpoints_with_their_metrics(owner_client, digits_run):
    choices = owner_client.get(reverse("api-run-checkpoints", args=[digits_run.pk])).json()["checkpoints"]
    assert [c["value"] for c in choices[:2]] == ["best", "last"]
    assert "top-1 " in choices[0]["label"] and all(c["value"].isdigit() for c in choices[2:])


def test_it_shows_the_first_filters_and_chosen_activations(owner_client, digits_run):
    url = reverse("api-run-inside", args=[digits_run.pk])
    image = png(val_images(digits_run, 1)[0][0])
    body = owner_client.post(url, {"image": image}).json()
    assert body["filters"]["shape"] == [20, 1, 5, 5] and body["filters"]["image"].startswith("data:image/png")
    assert body["chosen"] == ["features.0", "features.2"]
    first = body["activations"][0]
    assert first["shape"] == [20, 8, 8] and first["shown_channels"] == 20
    assert first["stats"]["max"] >= first["stats"]["min"]
    assert {"name": "classifier.2", "type": "ReLU"} in body["layers"]
    image.seek(0)
    body = owner_client.post(url, {"image": image, "layers": "classifier.2,features.1"}).json()
    assert [a["shape"] for a in body["activations"]] == [[500], [20, 4, 4]]
    # The logits: one value per class, named by class, for the page's bars (no grey grid).
    image.seek(0)
    logits = owner_client.post(url, {"image": image, "layers": "classifier.3"}).json()["activations"][0]
    assert logits["labels"][:3] == ["0", "1", "2"] and len(logits["values"]) == len(logits["labels"]) == 10
    assert "image" not in logits
    image.seek(0)
    response = owner_client.post(url, {"image": image, "layers": "features.9"})
    assert response.status_code == 400 and "'features.9' is not a layer of this network" in response.json()["layers"][0]
