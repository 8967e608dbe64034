"""The pages: list, wizard (submit and preview), dataset page, mean, cancel, delete."""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets import building, services
from datasets.models import Dataset
from tests.datasets.conftest import make_class_folders, noise_image, zip_folder
from tests.support.factories import make_dataset_row
from workbench.runs.models import Run


def _ready_dataset(owner, import_root) -> Dataset:
    root = make_class_folders(import_root / "photos", {"a": 3, "b": 5})
    (root / "a" / "bad.jpg").write_text("no")
    dataset = services.dataset_create(
        owner=owner,
        name="photos",
        kind="folder",
        source={"path": str(root)},
        options={"image_width": 8, "image_height": 8, "val_percent": 0},
        queue=False,
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


@pytest.mark.django_db
def test_it_shows_a_ready_dataset_with_counts_chart_mean_and_skipped(owner_client, owner, import_root):
    dataset = _ready_dataset(owner, import_root)
    page = owner_client.get(f"/datasets/{dataset.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="histogram"' in html and "vendor/plotly.min.js" in html
    assert '"labels": ["a", "b"]' in html and '"train": [3, 5]' in html  # the chart's json_script
    assert f"/datasets/{dataset.pk}/mean.png" in html
    # The next step is where the page starts, not only below the runs list.
    assert html.index(f'href="/runs/new/?dataset={dataset.pk}" class="button" id="new-run"') < html.index(
        'id="histogram"'
    )
    assert "bad.jpg" in html and "not an image" in html
    mean = owner_client.get(f"/datasets/{dataset.pk}/mean.png")
    assert mean.status_code == 200 and mean["Content-Type"] == "image/png"
    listing = owner_client.get("/datasets/").content.decode()
    assert f'href="/datasets/{dataset.pk}/"' in listing


@pytest.mark.django_db
def test_it_returns_404_for_someone_elses_dataset_pages(client, owner, other_user):
    dataset = make_dataset_row(owner, name="private", status=Dataset.Status.PENDING)
    client.force_login(other_user)
    for url in (f"/datasets/{dataset.pk}/", f"/datasets/{dataset.pk}/mean.png", f"/datasets/{dataset.pk}/delete/"):
        assert client.get(url).status_code == 404
    assert client.post(f"/datasets/{dataset.pk}/cancel/").status_code == 404
    assert "private" not in client.get("/datasets/").content.decode()


def test_it_requires_login_for_pages(client, db):
    response = client.get("/datasets/new/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.django_db
def test_it_creates_from_the_wizard_form(owner_client, import_root, monkeypatch):
    queued = []
    monkeypatch.setattr(services, "dataset_queue", lambda *, dataset: queued.append(dataset.pk))
    root = make_class_folders(import_root / "w", {"a": 2, "b": 2})
    form = {
        "name": "w",
        "kind": "auto",
        "source_path": str(root),
        "image_width": 32,
        "image_height": 32,
        "channels": 3,
        "resize_mode": "crop",
        "encoding": "jpg",
        "val_percent": 25,
        "test_percent": 0,
        "min_per_class": 2,
        "shuffle": "true",
        "seed": 5,
    }
    response = owner_client.post("/datasets/new/", form)
    dataset = Dataset.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/datasets/{dataset.pk}/"
    assert (dataset.kind, dataset.resize_mode, dataset.encoding, dataset.seed) == ("folder", "crop", "jpg", 5)
    assert queued == [dataset.pk]


@pytest.mark.django_db
def test_it_shows_wizard_errors_naming_the_allowed_roots(owner_client, import_root):
    response = owner_client.post("/datasets/new/", {"name": "x", "source_path": "/etc", "image_width": 0})
    html = response.content.decode()
    assert response.status_code == 400
    assert "not inside an allowed import folder" in html and str(import_root.parent) in html
    assert "Ensure this value is greater than or equal to 1" in html


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["squash", "crop", "fill", "half_crop"])
def test_it_previews_the_first_image_after_resizing(owner_client, import_root, mode):
    root = import_root / "p"
    (root / "a").mkdir(parents=True)
    noise_image((40, 20)).save(root / "a" / "wide.png")
    (root / "b").mkdir()  # a source the build takes: two classes (of one image each, allowed here)
    noise_image((8, 8)).save(root / "b" / "small.png")
    fields = {"source_path": str(root), "image_width": 16, "image_height": 16, "resize_mode": mode, "min_per_class": 1}
    response = owner_client.post("/datasets/new/preview/", fields)
    body = response.json()
    assert response.status_code == 200, body
    assert body["file"] == "a/wide.png" and body["original_size"] == [40, 20]
    assert body["resized"].startswith("data:image/png;base64,")
    import base64
    import io

    from PIL import Image

    resized = Image.open(io.BytesIO(base64.b64decode(body["resized"].split(",", 1)[1])))
    assert resized.size == (16, 16)


@pytest.mark.django_db
def test_it_previews_an_image_inside_an_uploaded_archive(owner_client, owner, tmp_path):
    from datasets.uploads import upload_save

    folder = make_class_folders(tmp_path / "z", {"a": 1, "b": 1}, size=(30, 10))
    archive = zip_folder(folder, tmp_path / "z.zip")

    class Uploaded:
        name = "z.zip"

        def chunks(self):
            yield archive.read_bytes()

    token, _ = upload_save(user_id=owner.pk, uploaded_file=Uploaded())
    fields = {"upload": token, "image_width": 10, "image_height": 10, "min_per_class": 1}
    body = owner_client.post("/datasets/new/preview/", fields).json()
    assert body["file"] == "z/a/img_0.png" and body["original_size"] == [30, 10]
    assert body["classes"] == {"a": 1, "b": 1}


@pytest.mark.django_db
def test_it_refuses_delete_while_runs_use_the_dataset(owner_client, owner):
    dataset = make_dataset_row(owner, name="used")
    Run.objects.create(owner=owner, name="resnet-run", dataset=dataset, network="resnet18")
    page = owner_client.post(f"/datasets/{dataset.pk}/delete/")
    assert page.status_code == 409
    assert "cannot be deleted" in page.content.decode() and "resnet-run" in page.content.decode()
    assert Dataset.objects.filter(pk=dataset.pk).exists()


@pytest.mark.django_db
def test_it_deletes_the_dataset_and_its_files(owner_client, owner, import_root):
    dataset = _ready_dataset(owner, import_root)
    assert dataset.path.is_dir()
    response = owner_client.post(f"/datasets/{dataset.pk}/delete/")
    assert response.status_code == 302
    assert not Dataset.objects.exists() and not dataset.path.exists()


@pytest.mark.django_db
def test_it_cancels_from_the_page(owner_client, owner):
    dataset = make_dataset_row(owner, name="slow", status="building")
    response = owner_client.post(f"/datasets/{dataset.pk}/cancel/")
    assert response.status_code == 302
    dataset.refresh_from_db()
    assert dataset.status == "cancelled"


@pytest.mark.django_db
def test_it_says_on_the_page_why_a_build_started_again(owner_client, owner):
    note = "Interrupted (worker w@gpu1 stopped sending heartbeats); building again from the start (try 2)."
    dataset = make_dataset_row(owner, name="again", status="building", error=note, build_attempts=2)
    html = owner_client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert 'id="build-note"' in html and "stopped sending heartbeats" in html


@pytest.mark.django_db
def test_it_never_names_another_users_run_on_a_dataset(owner, staff_user, client):
    # A staff member may train on alice's dataset; alice must not learn that run's name.
    from workbench.runs.services import run_create

    dataset = make_dataset_row(owner, name="digits")
    run_create(
        owner=staff_user, dataset=dataset, name="carol-secret-project", network="lenet", config={},
        device_request={"kind": "cpu"},
    )  # fmt: skip
    client.force_login(owner)
    pages = [
        client.get(reverse("dataset-detail", args=[dataset.pk])),
        client.post(reverse("dataset-delete", args=[dataset.pk])),
        client.delete(reverse("api-dataset-detail", args=[dataset.pk])),
    ]
    assert [page.status_code for page in pages] == [200, 409, 409]
    for page in pages:
        assert "carol-secret-project" not in page.content.decode() and "another user" in page.content.decode()
    assert pages[2].json()["runs"] == [{"id": None, "name": "another user's run", "state": "queued"}]
    assert Dataset.objects.filter(pk=dataset.pk).exists()

    client.force_login(staff_user)  # the run's own owner sees it by name
    assert "carol-secret-project" in client.get(reverse("dataset-detail", args=[dataset.pk])).content.decode()


@pytest.mark.django_db
def test_it_lists_each_dataset_s_task_and_a_labelled_folder_by_its_format(owner_client, owner):
    make_dataset_row(owner, name="street", task="detection", kind="folder", source={"format": "kitti"})
    make_dataset_row(owner, name="fruit", kind="folder")
    html = owner_client.get("/datasets/").content.decode()
    street = html.split(">street</a>", 1)[1].split("</tr>", 1)[0]
    assert "<td>Detection</td>" in street and "Folder of images and labels, KITTI txt" in street
    assert "class folders" not in street
    fruit = html.split(">fruit</a>", 1)[1].split("</tr>", 1)[0]
    assert "<td>Classification</td>" in fruit and "Folder of class folders" in fruit


@pytest.mark.django_db
def test_it_says_a_dataset_split_by_its_source_s_own_lists(owner_client, owner, tmp_path):
    import json

    from datasets.labels import read_labels
    from datasets.labels.classes import class_preview
    from tests.datasets.labels.test_splits import SHAPES, write_voc_masks_with_lists

    source = read_labels(write_voc_masks_with_lists(tmp_path / "voc", SHAPES), "voc_masks")
    dataset = make_dataset_row(owner, name="voc", task="segmentation", source={"format": "voc_masks"})
    dataset.path.mkdir(parents=True)
    (dataset.path / "label_report.json").write_text(json.dumps(class_preview(source, None)))
    html = owner_client.get(f"/datasets/{dataset.pk}/").content.decode()
    split = html.split('id="dataset-split">', 1)[1].split("</dd>", 1)[0]
    assert split == "the source's own lists: ImageSets/Segmentation/train.txt, ImageSets/Segmentation/val.txt"
