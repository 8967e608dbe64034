"""Every API endpoint answers a JSON body that is not an object with a 4xx and a message, never a 500.

The URLs come from the URL resolver, so an endpoint added later is covered without editing this
file; an operation whose OpenAPI schema says it reads a JSON body must answer exactly 400.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token

from datasets.models import Dataset, DatasetVersion
from datasets.uploads import upload_start
from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark
from workbench.inference.docs import SCHEMA_SETTINGS
from workbench.inference.models import InferenceJob
from workbench.labelchecks.models import LabelCheck
from workbench.projects.models import Membership, Project
from workbench.runs.services import run_create
from workbench.searches.models import Search
from workbench.weights.models import UploadedWeights

BODIES = ["[null, null]", "5", "true", "null", '"x"', "[]", "1.5"]
WITH_BODY = {"post", "put", "patch", "delete"}


def _api_routes(patterns=None, prefix: str = "") -> list[tuple[str, object]]:
    """(route, view) for every URL under /api/, as written in the urlconf (`runs/<int:pk>/`)."""
    routes = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            routes += _api_routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and route.startswith("api/"):
            routes.append((route, entry.callback))
    return routes


def _methods(view) -> list[str]:
    cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
    assert cls is not None, f"{view} is not a class-based or DRF view"
    return sorted(m for m in WITH_BODY if hasattr(cls, m))


CASES = [(route, method) for route, view in _api_routes() for method in _methods(view)]


@pytest.fixture
def objects(owner):
    """One object of each kind a URL can name, owned by `owner`; the run is never started.

    `owner` is made staff so that staff-only operations read their body too.
    """
    owner.is_staff = True
    owner.save()
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)
    run = run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    job = InferenceJob.objects.create(owner=owner, run=run, kind=InferenceJob.Kind.CLASSIFY)
    weights = UploadedWeights.objects.create(owner=owner, name="w", path=f"pretrained/{owner.pk}-w.pt")
    # Already ended: a cancel answers (409) without reaching a worker.
    benchmark = Benchmark.objects.create(owner=owner, name="b", state=Benchmark.State.CANCELLED)
    # Ended too: its actions answer without reaching Optuna's study.
    search = Search.objects.create(owner=owner, name="s", dataset=dataset, network="lenet", max_trials=1,
                                   study_name="api-bodies", state=Search.State.ABORTED)  # fmt: skip
    # Ended: its actions answer without reaching a run.
    version = DatasetVersion.objects.create(dataset=dataset, number=1, digest="0" * 32)
    check = LabelCheck.objects.create(owner=owner, dataset=dataset, version=version, network="lenet",
                                      state=LabelCheck.State.ABORTED)  # fmt: skip
    project = Project.objects.create(name="p", slug="p")
    Membership.objects.create(project=project, user=owner, role=Membership.Role.ADMIN)
    return {
        "projects": project.slug,
        "members": owner.username,
        "benchmarks": benchmark.pk,
        "searches": search.pk,
        "pretrained": weights.pk,
        "datasets": dataset.pk,
        "versions": 1,
        "label-checks": check.pk,
        "runs": run.pk,
        "jobs": job.pk,
        "uploads": upload_start(user_id=owner.pk, filename="a.zip", size=10),
    }


def _url(route: str, objects: dict) -> str:
    def fill(match: re.Match) -> str:
        converter, name = match.group(1) or "str", match.group(2)
        if converter == "uuid":
            return str(uuid.uuid4())
        segment = route[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        assert segment in objects, f"add an object for '{segment}/<{name}>' to the objects fixture"
        return str(objects[segment])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)


@pytest.fixture(scope="module")
def json_operations(django_db_blocker) -> set[tuple[str, str]]:
    """(path, method) of every operation whose schema declares a JSON request body."""
    with django_db_blocker.unblock():
        schema = SchemaGenerator(**{"title": SCHEMA_SETTINGS["TITLE"]}).get_schema(request=None, public=True)
    return {
        (path, method)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    }


def _schema_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "{id}" if m.group(1) == "pk" else "{" + m.group(1) + "}", route)


def test_it_finds_the_api_endpoints():
    routes = {route for route, _ in CASES}
    assert {"api/auth/token/", "api/datasets/", "api/datasets/uploads/", "api/runs/"} <= routes


@pytest.mark.django_db
@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize(("route", "method"), CASES)
def test_it_answers_bodies_that_are_not_json_objects_with_a_message(
    client, owner, objects, json_operations, route, method, body
):
    token = Token.objects.create(user=owner)
    url = _url(route, objects)
    response = getattr(client, method)(
        url, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Token {token.key}"
    )
    assert response.status_code < 500, f"{method.upper()} {url} with {body}: {response.status_code}"
    if (_schema_path(route), method) in json_operations:
        assert response.status_code == 400, f"{method.upper()} {url} with {body}: {response.status_code}"
        assert "must be a JSON object" in json.loads(response.content)["detail"]
    elif response.status_code >= 400:
        message = json.loads(response.content)
        assert message.get("detail") or message.get("errors"), f"{method.upper()} {url}: no message in {message}"


# Found by the schema fuzzer (tests/workbench/test_api_fuzz.py), kept here as quick cases.
@pytest.mark.django_db
def test_it_answers_an_unknown_api_url_with_json(owner_client):
    response = owner_client.get("/api/datasets/-5/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
    assert owner_client.get("/no-such-page/")["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_it_refuses_a_run_filter_by_a_dataset_that_is_not_a_number(owner_client):
    response = owner_client.get("/api/runs/", {"dataset": "abc"})
    assert response.status_code == 400
    assert response.json() == {"dataset": ["give a dataset id (a whole number)"]}
