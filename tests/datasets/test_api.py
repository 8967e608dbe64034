"""The REST API: create from a server path or an upload, detail, list, cancel, delete, owners."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from datasets import building, services
from datasets.models import Dataset
from tests.datasets.conftest import make_class_folders, zip_folder
from tests.support.factories import make_dataset_row
from workbench.runs.models import Run


@pytest.fixture
def queued(monkeypatch):
    """Builds queued by the API, collected here and run in-process (the worker test covers the queue)."""
    ids = []
    monkeypatch.setattr(services, "dataset_queue", lambda *, dataset: ids.append(dataset.pk))
    return ids


def _build_all(ids):
    for pk in ids:
        building.dataset_build(dataset_id=pk)


@pytest.mark.django_db
def test_it_creates_a_dataset_from_a_server_folder(
    owner_client, import_root, queued, django_capture_on_commit_callbacks
):
    root = make_class_folders(import_root / "photos", {"a": 4, "b": 4})
    response = owner_client.post(
        "/api/datasets/",
        {"name": "photos", "source_path": str(root), "image_width": 8, "image_height": 8, "val_percent": 25},
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "pending" and body["kind"] == "folder"
    assert body["options"]["image_width"] == 8 and body["options"]["resize_mode"] == "squash"
    _build_all(queued)
    detail = owner_client.get(f"/api/datasets/{body['id']}/").json()
    assert detail["status"] == "ready"
    assert detail["labels"] == ["a", "b"]
    assert detail["splits"] == {
        "train": {"count": 6, "class_counts": [3, 3]},
        "val": {"count": 2, "class_counts": [1, 1]},
    }
    assert detail["progress"]["percent"] == 100.0 and detail["image_count"] == 8


@pytest.mark.django_db
def test_it_creates_a_dataset_from_an_uploaded_zip(owner_client, owner, tmp_path, queued):
    folder = make_class_folders(tmp_path / "zoo", {"chat été": 3, "犬": 3})
    archive = zip_folder(folder, tmp_path / "zoo.zip")
    upload = SimpleUploadedFile("zoo.zip", archive.read_bytes(), content_type="application/zip")
    response = owner_client.post(
        "/api/datasets/", {"name": "zoo", "archive": upload, "image_width": 6, "image_height": 6, "val_percent": 0}
    )
    assert response.status_code == 201, response.json()
    _build_all(queued)
    dataset = Dataset.objects.get(pk=response.json()["id"])
    assert dataset.status == "ready", dataset.error
    assert dataset.kind == "archive" and dataset.labels == ["chat été", "犬"]
    assert dataset.splits["train"]["class_counts"] == [3, 3]
    from django.conf import settings

    assert not list((settings.DATA_DIR / "uploads" / str(owner.pk)).iterdir())  # the upload is removed once built


@pytest.mark.django_db
def test_it_uploads_first_then_creates_from_the_token(owner_client, tmp_path, queued):
    folder = make_class_folders(tmp_path / "zoo", {"a": 2, "b": 2})
    archive = zip_folder(folder, tmp_path / "zoo.zip")
    upload = owner_client.post("/api/datasets/uploads/", {"archive": archive.open("rb")})
    assert upload.status_code == 201
    token = upload.json()["upload"]
    response = owner_client.post("/api/datasets/", {"name": "z", "upload": token}, content_type="application/json")
    assert response.status_code == 201, response.json()


@pytest.mark.django_db
def test_it_refuses_an_upload_over_the_size_limit(owner_client, tmp_path, settings):
    settings.MAX_UPLOAD_BYTES = 1000
    big = SimpleUploadedFile("big.zip", b"\0" * 200_000, content_type="application/zip")
    response = owner_client.post("/api/datasets/uploads/", {"archive": big})
    assert response.status_code == 413
    assert "larger than the limit of 1000 bytes" in response.json()["detail"]
    uploads = settings.DATA_DIR / "uploads"
    assert not any(p.is_file() for p in uploads.rglob("*") if "tmp" not in p.parts)


@pytest.mark.django_db
def test_it_counts_upload_bytes_while_streaming(owner, tmp_path, settings, rf):
    """A client that understates Content-Length is stopped by the count, not the header."""
    from datasets.uploads import CappedUploadHandler

    settings.MAX_UPLOAD_BYTES = 1000
    handler = CappedUploadHandler()
    handler.new_file("archive", "big.zip", "application/zip", 10)
    from django.core.files.uploadhandler import StopUpload

    handler.receive_data_chunk(b"\0" * 800, 0)
    with pytest.raises(StopUpload):
        handler.receive_data_chunk(b"\0" * 800, 800)
    assert handler.too_large


@pytest.mark.django_db
def test_it_refuses_a_server_path_outside_the_allowed_roots(owner_client, tmp_path, import_root):
    make_class_folders(tmp_path / "elsewhere", {"a": 2, "b": 2})
    response = owner_client.post(
        "/api/datasets/", {"name": "x", "source_path": str(tmp_path / "elsewhere")}, content_type="application/json"
    )
    assert response.status_code == 400
    message = response.json()["errors"]["source_path"][0]
    assert "not inside an allowed import folder" in message and str(import_root.parent) in message
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_it_refuses_a_symlink_that_leads_out_of_the_roots(owner_client, tmp_path, import_root):
    make_class_folders(tmp_path / "secret", {"a": 2, "b": 2})
    (import_root / "link").symlink_to(tmp_path / "secret")
    response = owner_client.post(
        "/api/datasets/", {"name": "x", "source_path": str(import_root / "link")}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "not inside an allowed import folder" in response.json()["errors"]["source_path"][0]


@pytest.mark.django_db
def test_it_names_missing_list_labels_and_bad_options(owner_client, import_root):
    (import_root / "list.txt").write_text("a.png 0\n")
    response = owner_client.post(
        "/api/datasets/",
        {"name": "x", "source_path": str(import_root / "list.txt"), "channels": 2, "resize_mode": "stretch"},
        content_type="application/json",
    )
    errors = response.json()["errors"]
    assert response.status_code == 400
    assert set(errors) >= {"channels", "resize_mode"}
    response = owner_client.post(
        "/api/datasets/", {"name": "x", "source_path": str(import_root / "list.txt")}, content_type="application/json"
    )
    assert "needs a labels file" in response.json()["errors"]["labels_path"][0]


@pytest.mark.django_db
def test_it_hides_other_users_datasets(client, owner, other_user, staff_user):
    dataset = make_dataset_row(owner, name="mine", status=Dataset.Status.PENDING)
    client.force_login(other_user)
    assert client.get(f"/api/datasets/{dataset.pk}/").status_code == 404
    assert client.get("/api/datasets/999999/").status_code == 404
    assert client.delete(f"/api/datasets/{dataset.pk}/").status_code == 404
    assert client.post(f"/api/datasets/{dataset.pk}/cancel/").status_code == 404
    assert client.get("/api/datasets/").json()["results"] == []
    client.force_login(staff_user)
    assert client.get(f"/api/datasets/{dataset.pk}/").status_code == 200
    assert [d["name"] for d in client.get("/api/datasets/").json()["results"]] == ["mine"]


def test_it_requires_authentication(client, db):
    assert client.get("/api/datasets/").status_code in (401, 403)


@pytest.mark.django_db
def test_it_accepts_token_authentication(client, owner):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=owner)
    make_dataset_row(owner, name="t", status=Dataset.Status.PENDING)
    response = client.get("/api/datasets/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200 and response.json()["count"] == 1


@pytest.mark.django_db
def test_it_cancels_a_pending_dataset(owner_client, owner):
    dataset = make_dataset_row(owner, name="p", status=Dataset.Status.PENDING)
    response = owner_client.post(f"/api/datasets/{dataset.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert building.dataset_build(dataset_id=dataset.pk) == "skipped"
    assert owner_client.post(f"/api/datasets/{dataset.pk}/cancel/").status_code == 409


@pytest.mark.django_db
def test_it_refuses_to_delete_a_dataset_that_runs_use(owner_client, owner):
    dataset = make_dataset_row(owner, name="used")
    run = Run.objects.create(owner=owner, name="lenet-1", dataset=dataset, network="lenet")
    response = owner_client.delete(f"/api/datasets/{dataset.pk}/")
    assert response.status_code == 409
    assert response.json()["runs"] == [{"id": run.pk, "name": "lenet-1", "state": run.state}]
    run.delete()
    assert owner_client.delete(f"/api/datasets/{dataset.pk}/").status_code == 204
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_it_pages_the_gallery_per_class(owner_client, import_root, queued):
    root = make_class_folders(import_root / "g", {"a": 3, "b": 5})
    pk = owner_client.post(
        "/api/datasets/",
        {"name": "g", "source_path": str(root), "val_percent": 0, "image_width": 4, "image_height": 4},
        content_type="application/json",
    ).json()["id"]
    _build_all(queued)
    from trainer.datum import DatumLMDB

    reader = DatumLMDB(Dataset.objects.get(pk=pk).path / "train_db")
    reader.keys()  # another reader in this process holds the LMDB open: the gallery must share it
    page = owner_client.get(f"/api/datasets/{pk}/gallery/", {"split": "train", "label": 1}).json()
    reader.close()
    assert page["total"] == 5 and len(page["items"]) == 5
    assert all(item["label"] == 1 and item["src"].startswith("data:image/png;base64,") for item in page["items"])
    assert owner_client.get(f"/api/datasets/{pk}/gallery/", {"split": "bogus"}).status_code == 400
    # One item alone, at its stored size: what a thumbnail opens to.
    first = page["items"][0]
    one = owner_client.get(f"/api/datasets/{pk}/gallery/", {"split": "train", "item": first["index"]}).json()
    assert (one["key"], one["label"], one["width"], one["height"]) == (first["key"], 1, 4, 4)
    assert owner_client.get(f"/api/datasets/{pk}/gallery/", {"split": "train", "item": 99}).status_code == 404


@pytest.mark.django_db
def test_it_creates_from_a_text_list_and_from_an_lmdb(owner_client, import_root, queued):
    import numpy as np

    from trainer.datum import encode_datum, write_datum_lmdb

    images = make_class_folders(import_root / "img", {"a": 3, "b": 3})
    (import_root / "labels.txt").write_text("a\nb\n")
    lines = [f"{c}/img_{i}.png {y}" for y, c in enumerate("ab") for i in range(3)]
    (import_root / "train.txt").write_text("\n".join(lines) + "\n")
    listed = owner_client.post(
        "/api/datasets/",
        {
            "name": "list",
            "source_path": str(import_root / "train.txt"),
            "labels_path": str(import_root / "labels.txt"),
            "image_folder": str(images),
            "val_percent": 0,
        },
        content_type="application/json",
    )
    assert listed.status_code == 201, listed.json()
    rng = np.random.default_rng(1)
    records = ((b"%d" % i, encode_datum(rng.integers(0, 255, (5, 5, 1), dtype=np.uint8), i % 2)) for i in range(4))
    write_datum_lmdb(import_root / "caffe_lmdb", records, map_size=1 << 20)
    lmdb_made = owner_client.post(
        "/api/datasets/",
        {
            "name": "lmdb",
            "source_path": str(import_root / "caffe_lmdb"),
            "labels_path": str(import_root / "labels.txt"),
        },
        content_type="application/json",
    )
    assert lmdb_made.status_code == 201, lmdb_made.json()
    _build_all(queued)
    first = owner_client.get(f"/api/datasets/{listed.json()['id']}/").json()
    assert first["kind"] == "textlist" and first["splits"]["train"] == {"count": 6, "class_counts": [3, 3]}
    second = owner_client.get(f"/api/datasets/{lmdb_made.json()['id']}/").json()
    assert second["kind"] == "lmdb" and second["labels"] == ["a", "b"]
    assert second["splits"]["train"] == {"count": 4, "class_counts": [2, 2]}
    assert second["options"]["channels"] == 1 and second["options"]["image_width"] == 5


@pytest.mark.django_db
def test_it_rebuilds_a_cancelled_dataset(owner_client, import_root, queued):
    root = make_class_folders(import_root / "r", {"a": 2, "b": 2})
    pk = owner_client.post(
        "/api/datasets/", {"name": "r", "source_path": str(root), "val_percent": 0}, content_type="application/json"
    ).json()["id"]
    assert owner_client.post(f"/api/datasets/{pk}/cancel/").json()["status"] == "cancelled"
    assert owner_client.post(f"/api/datasets/{pk}/rebuild/").json()["status"] == "pending"
    assert owner_client.post(f"/api/datasets/{pk}/rebuild/").status_code == 409  # only failed/cancelled
    _build_all(queued)
    assert owner_client.get(f"/api/datasets/{pk}/").json()["status"] == "ready"
    assert queued == [pk, pk]


@pytest.mark.django_db
def test_it_refuses_another_users_upload_token(client, owner, other_user, tmp_path):
    folder = make_class_folders(tmp_path / "zoo", {"a": 2, "b": 2})
    archive = zip_folder(folder, tmp_path / "zoo.zip")
    client.force_login(owner)
    token = client.post("/api/datasets/uploads/", {"archive": archive.open("rb")}).json()["upload"]
    client.force_login(other_user)
    response = client.post("/api/datasets/", {"name": "stolen", "upload": token}, content_type="application/json")
    assert response.status_code == 400
    assert "unknown or has expired" in response.json()["errors"]["upload"][0]


@pytest.mark.django_db
def test_it_does_not_keep_an_upload_whose_dataset_is_refused(owner_client, owner, tmp_path):
    from django.conf import settings

    fake = SimpleUploadedFile("photos.zip", b"this is not a zip", content_type="application/zip")
    response = owner_client.post("/api/datasets/", {"name": "x", "archive": fake})
    assert response.status_code == 400
    assert "not a zip or tar archive" in str(response.json()["errors"])
    assert not list((settings.DATA_DIR / "uploads" / str(owner.pk)).iterdir())


@pytest.mark.parametrize("classes", [{}, {"only": 3}], ids=["empty", "one class"])
def test_it_refuses_an_empty_or_one_class_archive_at_the_request(owner_client, owner, tmp_path, queued, classes):
    # The wizard's rule, at the API and the command line alike: no row, no build that fails later.
    archive = zip_folder(make_class_folders(tmp_path / "few", classes), tmp_path / "few.zip")
    upload = SimpleUploadedFile("few.zip", archive.read_bytes(), content_type="application/zip")
    response = owner_client.post("/api/datasets/", {"name": "few", "archive": upload})
    assert response.status_code == 400
    found = "'only'" if classes else "none"
    refusal = f"few.zip: a classifier needs at least 2 classes with images; usable classes: {found}"
    assert response.json()["errors"] == {"__all__": [refusal]}
    with pytest.raises(CommandError) as error:
        call_command("import_dataset", str(archive), "--owner", owner.username, stdout=io.StringIO())
    assert str(error.value) == f"SOURCE: {refusal}"
    assert not Dataset.objects.exists() and not queued


def _put_chunk(client, token, offset, data):
    return client.put(
        f"/api/datasets/uploads/{token}/",
        data=data,
        content_type="application/octet-stream",
        HTTP_UPLOAD_OFFSET=str(offset),
    )


@pytest.mark.django_db
def test_it_takes_an_archive_in_chunks_and_resumes(owner_client, tmp_path, queued, monkeypatch):
    from datasets import uploads

    monkeypatch.setattr(uploads, "CHUNK_BYTES", 1000)
    folder = make_class_folders(tmp_path / "zoo", {"a": 3, "b": 3})
    data = zip_folder(folder, tmp_path / "zoo.zip").read_bytes()
    start = owner_client.post(
        "/api/datasets/uploads/", {"filename": "zoo.zip", "size": len(data)}, content_type="application/json"
    )
    assert start.status_code == 201
    token = start.json()["upload"]
    assert _put_chunk(owner_client, token, 0, data[:1000]).json()["received"] == 1000
    again = _put_chunk(owner_client, token, 0, data[:1000])  # a retried chunk the server already has
    assert again.status_code == 409 and again.json()["received"] == 1000
    assert owner_client.get(f"/api/datasets/uploads/{token}/").json()["received"] == 1000
    offset = 1000
    while offset < len(data):
        state = _put_chunk(owner_client, token, offset, data[offset : offset + 1000]).json()
        offset = state["received"]
    assert state["complete"] and state["size"] == len(data)
    response = owner_client.post(
        "/api/datasets/", {"name": "zoo", "upload": token, "val_percent": 0}, content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    _build_all(queued)
    assert Dataset.objects.get().splits["train"]["class_counts"] == [3, 3]


@pytest.mark.django_db
def test_it_refuses_chunked_uploads_over_the_limits(owner_client, settings, client, other_user):
    settings.MAX_UPLOAD_BYTES = 5000
    too_big = owner_client.post(
        "/api/datasets/uploads/", {"filename": "x.zip", "size": 5001}, content_type="application/json"
    )
    assert too_big.status_code == 413 and "larger than the limit of 5000 bytes" in too_big.json()["detail"]
    token = owner_client.post(
        "/api/datasets/uploads/", {"filename": "x.zip", "size": 10}, content_type="application/json"
    ).json()["upload"]
    past = _put_chunk(owner_client, token, 0, b"x" * 11)
    assert past.status_code == 413 and "past the declared size of 10 bytes" in past.json()["detail"]
    half = owner_client.post("/api/datasets/", {"name": "x", "upload": token}, content_type="application/json")
    assert "unknown or has expired" in half.json()["errors"]["upload"][0]  # not complete yet
    client.force_login(other_user)
    assert _put_chunk(client, token, 0, b"x" * 10).status_code == 404
    assert client.get(f"/api/datasets/uploads/{token}/").status_code == 404


@pytest.mark.django_db
def test_it_prunes_abandoned_uploads_but_not_those_a_dataset_uses(owner_client, owner):
    import os
    import time

    from django.conf import settings

    tokens = [
        owner_client.post(
            "/api/datasets/uploads/", {"filename": f"{i}.zip", "size": 5}, content_type="application/json"
        ).json()["upload"]
        for i in range(2)
    ]
    make_dataset_row(owner, name="keeps", kind="archive", source={"upload": tokens[1]}, status=Dataset.Status.PENDING)
    old = time.time() - 2 * 24 * 3600
    for token in tokens:
        folder = settings.DATA_DIR / "uploads" / str(owner.pk) / token
        for path in [folder, *folder.iterdir()]:
            os.utime(path, (old, old))
    owner_client.post("/api/datasets/uploads/", {"filename": "new.zip", "size": 5}, content_type="application/json")
    assert owner_client.get(f"/api/datasets/uploads/{tokens[0]}/").status_code == 404
    assert owner_client.get(f"/api/datasets/uploads/{tokens[1]}/").status_code == 200


@pytest.mark.django_db
def test_it_imports_sklearn_digits_folders_through_the_api(owner_client, import_root, queued):
    from tests.datasets.conftest import sklearn_digits_folders

    root = sklearn_digits_folders(import_root / "digits", per_class=12)
    created = owner_client.post(
        "/api/datasets/",
        {
            "name": "digits",
            "source_path": str(root),
            "image_width": 8,
            "image_height": 8,
            "channels": 1,
            "val_percent": 25,
        },
        content_type="application/json",
    )
    assert created.status_code == 201, created.json()
    _build_all(queued)
    detail = owner_client.get(f"/api/datasets/{created.json()['id']}/").json()
    assert detail["status"] == "ready" and detail["labels"] == [str(i) for i in range(10)]
    assert detail["splits"]["train"]["class_counts"] == [9] * 10 and detail["splits"]["val"]["count"] == 30


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"filename": {}, "size": 10}, "filename"),  # was taken, as the file name "{}"
        ({"filename": ["a.zip"], "size": 10}, "filename"),
        ({"filename": "a" * 300 + ".zip", "size": 10}, "filename"),
        ({"filename": "a.zip", "size": True}, "size"),  # int(True) is 1
        ({"filename": "a.zip", "size": 1.5}, "size"),
        ({"filename": "a.zip", "size": -1}, "size"),
        ({"filename": "a.zip", "size": "9" * 5000}, "size"),
    ],
)
def test_it_refuses_a_chunked_upload_request_naming_the_field(owner_client, body, field):
    response = owner_client.post("/api/datasets/uploads/", body, content_type="application/json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [field]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data; boundary=xyz", b""),
        ("multipart/form-data; boundary=", b""),
        ("multipart/form-data; boundary=xyz", b"--xyz--\r\n"),
        ("multipart/form-data; boundary=xyz", b"garbage"),
        ("application/x-www-form-urlencoded", b""),
    ],
)
def test_it_answers_an_empty_or_broken_multipart_upload_with_json_naming_the_field(owner_client, content_type, body):
    response = owner_client.generic("POST", "/api/datasets/uploads/", body, content_type=content_type)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json() == {"errors": {"archive": ["Attach the archive as the multipart field 'archive'."]}}
