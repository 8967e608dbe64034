"""The dataset wizard refuses a source at the earliest step that knows, with the reason: a file
that is no archive on the upload step, an archive without images or with one class on the
preview step. A refused upload's build names no internal path and offers no futile rebuild."""

from __future__ import annotations

import zipfile

import pytest

from datasets import building, services
from datasets.models import Dataset
from datasets.uploads import upload_save
from tests.conftest import log_in
from tests.datasets.conftest import image_bytes

pytestmark = [pytest.mark.django_db(transaction=True)]


def write_zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def current_step(page) -> str:
    return page.get_attribute(".step.current", "data-step")


@pytest.mark.e2e
@pytest.mark.slow
def test_it_refuses_a_file_that_is_no_archive_on_the_upload_step(live_server_url, page, owner, tmp_path):
    notes = tmp_path / "digits.zip"
    notes.write_text("these are my notes, not an archive\n")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.set_input_files("#archive-file", str(notes))
    page.wait_for_selector("#upload-status:has-text('Upload refused')")
    assert "digits.zip is not a zip or tar archive" in page.inner_text("#upload-status")
    page.click("#wizard-next")
    assert current_step(page) == "source"
    assert "digits.zip is not a zip or tar archive" in page.inner_text("#upload-status")  # the reason stays
    assert page.input_value("#archive-file") == ""  # the corrected file can be chosen at once


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    ("members", "reason"),
    [
        # The request's rule, as POST /api/datasets/ and import_dataset give it (datasets/validators.py).
        ({}, "one.zip: a classifier needs at least 2 classes with images; usable classes: none"),
        ({"digits/only/1.png": image_bytes(), "digits/only/2.png": image_bytes()},
         "one.zip: a classifier needs at least 2 classes with images; usable classes: 'only'"),
    ],
    ids=["empty", "one-class"],
)  # fmt: skip
def test_it_stops_on_the_source_step_a_source_the_build_would_refuse(
    live_server_url, page, owner, tmp_path, members, reason
):
    archive = write_zip(tmp_path / "one.zip", members)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.set_input_files("#archive-file", str(archive))
    page.wait_for_selector("text=Uploaded one.zip")
    page.click("#wizard-next")
    # Refused on the first step, which already knows (the preview request the server answers).
    page.wait_for_selector("#upload-status:has-text('cannot make a dataset')")
    assert reason in page.inner_text("#upload-status")
    assert current_step(page) == "source" and not Dataset.objects.exists()


def test_it_offers_no_rebuild_of_an_uploaded_archive_the_build_refused(owner, owner_client, tmp_path):
    archive = write_zip(tmp_path / "one.zip", {"only/1.png": image_bytes(), "only/2.png": image_bytes()})

    class Uploaded:
        name = "one.zip"

        def chunks(self):
            yield archive.read_bytes()

    token, path = upload_save(user_id=owner.pk, uploaded_file=Uploaded())
    source = {"upload": token, "path": str(path), "filename": "one.zip"}
    dataset = services.dataset_create(
        owner=owner, name="one", kind="archive", source=source, options={"image_width": 8}, queue=False
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.FAILED
    body = owner_client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert "one.zip: a classifier needs at least 2 classes" in body
    assert str(path.parent) not in body and ".extract-" not in body
    assert 'id="rebuild"' not in body and 'id="new-dataset"' in body
