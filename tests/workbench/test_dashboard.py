import pytest
from django.urls import reverse

from tests.support.factories import make_dataset_row
from workbench.runs.models import Run


@pytest.fixture
def alice_data(owner):
    dataset = make_dataset_row(owner, name="digits", status="building", progress_done=5, progress_total=20)
    Run.objects.create(owner=owner, name="lenet-1", dataset=dataset, network="lenet", state="running", progress=0.4)
    return dataset


def test_it_explains_the_next_step_when_empty(owner_client):
    body = owner_client.get(reverse("home")).content.decode()
    assert "No datasets yet" in body
    assert "No training runs yet" in body
    assert "No run or benchmark holds a device now" in body
    # It promises only what Home shows: the curves are on a run's page, not here.
    assert "stream here live" not in body


def test_it_links_datasets_and_runs_and_offers_new_ones(owner_client, alice_data):
    body = owner_client.get(reverse("home")).content.decode()
    run = Run.objects.get(name="lenet-1")
    assert f'href="/datasets/{alice_data.pk}/"' in body and f'href="/runs/{run.pk}/"' in body
    assert 'id="home-new-dataset" href="/datasets/new/"' in body and 'id="home-new-run" href="/runs/new/"' in body


def test_it_shows_what_runs_now_on_which_device(owner_client, owner, monkeypatch):
    from workbench.runs.devices import DeviceRequest
    from workbench.runs.scheduler import schedule
    from workbench.runs.services import run_create
    from workbench.workers.simulation import simulate_hosts

    monkeypatch.setattr("workbench.runs.scheduler.run_jobs.launch", lambda *args: True)
    (host,) = simulate_hosts(hosts=1, gpus_per_host=1)
    dataset = make_dataset_row(owner)
    for name in ("first", "second"):
        run_create(owner=owner, dataset=dataset, name=name, network="lenet", config={},
                   device_request=DeviceRequest.gpus(1))  # fmt: skip
    schedule()
    body = owner_client.get(reverse("home")).content.decode()
    running = body.split('id="home-running"')[1].split("</section>")[0]
    assert ">first</a>" in running and ">second</a>" not in running
    assert f"{host.hostname}: GPU 0" in running
    assert "1 waiting for devices" in running


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
