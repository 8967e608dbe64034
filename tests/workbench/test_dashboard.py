import pytest
from django.urls import reverse

from datasets.models import Dataset
from workbench.runs.models import Run


@pytest.fixture
def alice_data(owner):
    dataset = Dataset.objects.create(owner=owner, name="digits", status="building", progress_done=5, progress_total=20)
    Run.objects.create(owner=owner, name="lenet-1", dataset=dataset, network="lenet", state="running", progress=0.4)
    return dataset


def test_it_explains_the_next_step_when_empty(owner_client):
    body = owner_client.get(reverse("home")).content.decode()
    assert "No datasets yet" in body
    assert "No training runs yet" in body


def test_it_lists_datasets_and_runs_with_status_and_progress(owner_client, alice_data):
    body = owner_client.get(reverse("home")).content.decode()
    assert "digits" in body and "lenet-1" in body
    assert 'aria-valuenow="25"' in body  # 5 of 20 images
    assert 'aria-valuenow="40"' in body  # run at 40 %
    assert "status-running" in body


def test_it_hides_other_users_data(client, other_user, alice_data):
    client.force_login(other_user)
    body = client.get(reverse("home")).content.decode()
    assert "digits" not in body and "lenet-1" not in body


def test_it_shows_staff_everyones_data_with_owners(client, staff_user, alice_data):
    client.force_login(staff_user)
    body = client.get(reverse("home")).content.decode()
    assert "lenet-1" in body and "alice" in body


def test_it_loads_plotly_from_static(owner_client):
    from pathlib import Path

    import plotly

    from tests.conftest import REPO_ROOT

    vendored = REPO_ROOT / "static" / "vendor" / "plotly.min.js"
    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert vendored.read_bytes() == shipped.read_bytes(), "static/vendor/plotly.min.js differs from the plotly package"


def test_it_vendors_the_lines_bundle_of_the_same_plotly_version():
    # The run and comparison pages load Plotly's partial "gl2d" bundle (scatter and scattergl):
    # it must come from the same plotly.js release as the full bundle (bin/vendor-plotly).
    from tests.conftest import REPO_ROOT

    vendor = REPO_ROOT / "static" / "vendor"
    full_header = (vendor / "plotly.min.js").read_bytes()[:200].decode()
    lines_header = (vendor / "plotly-gl2d.min.js").read_bytes()[:200].decode()
    version = full_header.split("plotly.js v", 1)[1].split()[0]
    assert f"plotly.js (gl2d - minified) v{version}\n" in lines_header


def test_it_links_an_icon_that_is_served(owner_client):
    from django.contrib.staticfiles import finders

    body = owner_client.get(reverse("home")).content.decode()
    assert '<link rel="icon" href="/static/workbench/favicon.svg"' in body
    assert finders.find("workbench/favicon.svg")  # collectstatic and daphne serve it from there
