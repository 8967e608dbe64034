"""Accessibility as a gate: axe-core in Chromium on every page of the workbench, signed out, as a
user, as staff, empty and with rows, failing on any serious or critical finding (listed by page,
rule and target). axe.min.js comes from the axe-playwright-python wheel (requirements-test.txt),
injected from disk: no CDN, the suite runs offline.

The list of pages is not written by hand alone: `test_it_visits_or_excuses_every_named_url`
walks the urlconf, so a page added later fails here until it is visited or excused with a reason.
The same file checks the theme (dark by the system's preference; the header's switch overrides
it, is remembered and restyles the charts) and the keyboard: the "?" overlay and the skip link."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import axe_playwright_python
import pytest
from django.contrib import admin
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from datasets.models import DatasetVersion
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from trainer.protocol import TASKS
from workbench.benchmarks.models import Benchmark
from workbench.core.ownership import ADMIN
from workbench.core.task_table import task_row
from workbench.inference.models import InferenceJob
from workbench.labelchecks.models import LabelCheck, LabelCheckFold
from workbench.projects.models import Membership, Project, Quota
from workbench.runs.services import run_create
from workbench.searches.services import search_create

T = TypeVar("T")
AXE_JS = Path(axe_playwright_python.__file__).with_name("axe.min.js")
BLOCKING = ("serious", "critical")
# Findings in Django's own admin templates, which the workbench does not override: each rule is
# left out on /admin/ pages only, with why. Anything else on an admin page still fails.
DJANGO_ADMIN_KNOWN: dict[str, str] = {
    "label": "the split date/time widget's two inputs share one <label> (django.contrib.admin)",
    "aria-allowed-attr": "the filter_horizontal widget's help icon carries aria-label on a <span>",
    "label-title-only": "the change list's search box is named by its title alone",
}

# Every named URL that is not an HTML page for a browser, or is one reached another way, with why.
# Names under /api/ and the admin's own are left out by prefix and namespace (the admin's pages
# are visited from its registry, see `_admin_urls`).
NOT_PAGES: dict[str, str] = {
    "healthz": "JSON for monitors",
    "oidc_authentication_init": "a redirect to the lab's OpenID provider (404 without one)",
    "oidc_authentication_callback": "the provider's redirect back, with a code",
    "logout": "POST only",
    "first-admin": "404 once an account exists; the suite always has one (its form is tested in test_auth)",
    "password_change_done": "a sentence after a POST; same layout as password_change",
    "run-series": "JSON for the run page's charts",
    "run-series-csv": "CSV download",
    "run-series-json": "JSON download",
    "run-compare-series": "JSON for the compare page's charts",
    "run-priority": "POST only",
    "run-bulk": "POST only",
    "run-abort": "POST only",
    "run-new-lr-preview": "JSON for the new-run form",
    "run-new-layer-shapes": "JSON for the new-run form",
    "run-new-networks": "JSON for the new-run form",
    "run-new-placement": "JSON for the new-run form",
    "run-new-augment-preview": "JSON for the new-run form",
    "benchmark-cancel": "POST only",
    "benchmark-csv": "CSV download",
    "benchmark-markdown": "Markdown download",
    "search-new": "POST only: the new-run page's Create search (run-new is its page)",
    "search-plots": "JSON for the search page's plots",
    "dataset-preview": "JSON for the dataset wizard",
    "dataset-mean": "PNG",
    "dataset-skipped": "JSON download",
    "dataset-cancel": "POST only",
    "dataset-rebuild": "POST only",
    "dataset-check-duplicates": "POST only",
    "dataset-drop-leaks": "POST only",
    "dataset-version-delete": "POST only",
    "run-retrain": "POST only",
    "label-check-new": "POST only",
    "label-check-accept": "POST only",
    "label-check-abort": "POST only",
    "label-check-pause": "POST only",
    "label-check-resume": "POST only",
    "inference-job-csv": "CSV download",
    "inference-mistake": "PNG",
    "inference-top": "PNG",
    "inference-worst": "PNG",
    "inference-mask": "PNG",
    "inference-thumb": "PNG",
    "inference-job-delete": "POST only",
    "project-share": "POST only: the dataset and run pages' Project select",
    "project-member-set": "POST only: the project page's member form",
    "project-member-remove": "POST only: the project page's Remove buttons",
    "project-quota-set": "POST only: the project page's quota form (staff)",
    "project-quota-clear": "POST only: the project page's Clear of its quota (staff)",
    "project-quotas-clear": "POST only: the quotas page's Clear of a row",
}


def _named_urls(resolver: URLResolver | None = None, prefix: str = "") -> dict[str, str]:
    """Every named URL of the urlconf outside /api/ and the admin: name -> its route."""
    names: dict[str, str] = {}
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if route.startswith("api/"):
            continue
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue
            names |= _named_urls(entry, route)
        elif isinstance(entry, URLPattern) and entry.name:
            names[entry.name] = route
    return names


def _admin_urls() -> list[str]:
    """The admin's index, and each registered model's list and add form."""
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        if admin.site._registry[model].has_add_permission(_SuperRequest()):
            urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_add"))
    return urls


class _SuperRequest:
    """Enough of a request for has_add_permission: a superuser."""

    class user:  # noqa: N801 - an attribute, as a request has it
        is_active = is_staff = is_superuser = True

        @staticmethod
        def has_perm(perm: str, obj=None) -> bool:
            return True


def _with_data(owner) -> dict[str, str]:
    """Rows of every kind for `owner`, none of which starts (the datasets build): url name -> URL."""
    urls: dict[str, str] = {}
    runs = {}
    for task in TASKS:
        dataset = make_dataset_row(owner, name=f"{task} set", task=task, status="building")
        runs[task] = run_create(
            owner=owner, dataset=dataset, name=f"{task} run", network="lenet", config={}, device_request={"kind": "cpu"}
        )
        page = task_row(task).page
        urls[page] = reverse(page, args=[runs[task].pk])
        job = InferenceJob.objects.create(owner=owner, run=runs[task], kind=task_row(task).action)
        urls[f"inference-job {task}"] = reverse("inference-job", args=[runs[task].pk, job.pk])
    run = runs[TASKS[0]]
    urls["dataset-detail"] = reverse("dataset-detail", args=[run.dataset_id])
    urls["dataset-delete"] = reverse("dataset-delete", args=[run.dataset_id])
    for name in ("run-detail", "run-edit", "run-delete", "inference-test", "inference-inside", "inference-export"):
        urls[name] = reverse(name, args=[run.pk])
    urls["run-compare"] = reverse("run-compare") + "?" + "&".join(f"runs={r.pk}" for r in runs.values())
    # A project holding the first run and its dataset, the owner its admin: its page shows the
    # member form and the Remove buttons, the dataset's and run's pages their Project select.
    project = Project.objects.create(name="Vision lab", slug="vision-lab", description="the lab's shared work")
    Membership.objects.create(project=project, user=owner, role=ADMIN)
    for row in (run, run.dataset):
        type(row).objects.filter(pk=row.pk).update(project=project)
    urls["project-detail"] = reverse("project-detail", args=[project.slug])
    # Quotas, so Home, the project page and the staff's quotas page draw their meters: the owner's
    # with room, the project's spent (none allowed), with when it allows GPU jobs again.
    Quota.objects.create(user=owner, gpu_hours=10)
    Quota.objects.create(project=project, gpu_hours=0, period=Quota.Period.ROLLING, window_days=7)
    first = Benchmark.objects.create(owner=owner, name="speed", request={}, project=project)
    second = Benchmark.objects.create(owner=owner, name="speed 2", request={})
    urls["benchmark-detail"] = reverse("benchmark-detail", args=[first.pk])
    urls["benchmark-compare"] = reverse("benchmark-compare", args=[first.pk, second.pk])
    version = DatasetVersion.objects.create(dataset=run.dataset, number=1, digest="0" * 32)
    check = LabelCheck.objects.create(owner=owner, dataset=run.dataset, version=version, network="lenet", folds=2)
    LabelCheckFold.objects.create(label_check=check, index=0, run=run, places=[["train", 0]])
    urls["label-check-detail"] = reverse("label-check-detail", args=[check.pk])
    return urls


# The pages visited, by how: signed out, as a user with no rows (then again with rows), as staff,
# and those that need a row (`_with_data` and `_search_url` make one of each).
SIGNED_OUT_PAGES = ("login",)
EMPTY_PAGES = (
    "home", "gpus", "password_change", "run-list", "run-new", "run-queue", "run-compare", "dataset-list",
    "dataset-new", "search-list", "benchmark-list", "project-list", "notices", "label-check-list",
)  # fmt: skip
# The project list again: staff see its New project form; the quotas page lists the data's quotas.
STAFF_PAGES = ("weights", "audit", "project-list", "project-quotas")
DATA_PAGES = (
    "dataset-detail", "dataset-delete", "run-detail", "run-edit", "run-delete", "inference-classify",
    "inference-detect", "inference-segment", "inference-test", "inference-inside", "inference-export",
    "inference-job", "benchmark-detail", "benchmark-compare", "search-detail", "project-detail", "label-check-detail",
)  # fmt: skip
# Visited again in the dark theme, with EMPTY_PAGES: a page of each kind of layout.
DARK_PAGES = ("run-detail", "dataset-detail", "inference-classify", "inference-job classification", "search-detail",
              "benchmark-detail")  # fmt: skip
VISITED = {*SIGNED_OUT_PAGES, *EMPTY_PAGES, *STAFF_PAGES, *DATA_PAGES}


def _search_url(owner) -> str:
    dataset = make_dataset_row(owner, name="searched", status="building")
    search = search_create(
        owner=owner, dataset=dataset, name="space", network="lenet", config={}, space={"lr": {"type": "loguniform",
        "low": 1e-4, "high": 1e-1}}, gpus="cpu", trials=2, parallel=1, sampler="random", seed=5, pruner="none",
    )  # fmt: skip
    return reverse("search-detail", args=[search.pk])


def off_the_loop(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` from a thread of its own: the services publish to the channel layer with
    async_to_sync, which Playwright's event loop in this thread refuses."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args).result(timeout=60)


def _axe(page, url: str, status: int = 200) -> list[str]:
    """The serious and critical findings of axe on `url`, one line each: page, rule, targets."""
    response = page.goto(url, timeout=60_000)  # the weights page reads its catalogue: slow on a busy machine
    assert response is not None and response.status == status, f"{url}: {response and response.status}"
    try:
        # What a page's script draws after load (tables, charts) is checked too; a page that polls
        # (the GPUs page) is never idle, and is checked as it stands after the wait.
        page.wait_for_load_state("networkidle", timeout=5_000)
    except PlaywrightTimeout:
        pass
    # A template comment over several lines ({# #} is one line's) is printed to every reader.
    assert "{#" not in page.inner_text("body"), f"{url}: a template comment shows on the page"
    page.add_script_tag(path=str(AXE_JS))
    results = page.evaluate("() => axe.run(document, { resultTypes: ['violations'] })")
    return [
        f"{url}: {violation['id']} ({violation['impact']}) {violation['help']} at "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:6])
        for violation in results["violations"]
        if violation["impact"] in BLOCKING and not ("/admin/" in url and violation["id"] in DJANGO_ADMIN_KNOWN)
    ]


def test_it_visits_or_excuses_every_named_url():
    missing = {name: route for name, route in _named_urls().items() if name not in VISITED and name not in NOT_PAGES}
    assert not missing, f"pages neither visited by this file's axe run nor excused in NOT_PAGES: {missing}"
    assert not set(NOT_PAGES) & VISITED, "a page both visited and excused"
    assert not set(NOT_PAGES) - set(_named_urls()), "an excuse for a page that is gone"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_finds_nothing_serious_on_any_page(live_server_url, page, owner, staff_user):
    errors: list[str] = []  # a page's script that fails (a shared module's import) fails here too
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    findings = [line for name in SIGNED_OUT_PAGES for line in _axe(page, f"{live_server_url}{reverse(name)}")]
    log_in(page, live_server_url, owner.username)
    for name in EMPTY_PAGES:
        findings += _axe(page, f"{live_server_url}{reverse(name)}")
    urls = off_the_loop(_with_data, owner)
    urls["search-detail"] = off_the_loop(_search_url, owner)
    # "inference-job <task>": one per task; "run-compare" again, comparing the runs.
    assert {key.split()[0] for key in urls} - set(EMPTY_PAGES) == set(DATA_PAGES)
    for name in dict.fromkeys((*EMPTY_PAGES, *urls)):
        findings += _axe(page, f"{live_server_url}{urls.get(name) or reverse(name)}")
    findings += _axe(page, f"{live_server_url}/no-such-page/", status=404)  # the error pages' layout
    # Dark has contrasts of its own: the pages of most kinds again in it.
    page.emulate_media(color_scheme="dark")
    for name in (*EMPTY_PAGES, *DARK_PAGES):
        findings += [f"(dark) {line}" for line in _axe(page, f"{live_server_url}{urls.get(name) or reverse(name)}")]
    page.emulate_media(color_scheme="light")
    log_in(page, live_server_url, staff_user.username)
    staff_user.is_superuser = True
    staff_user.save()
    for url in [reverse(name) for name in STAFF_PAGES] + _admin_urls():
        findings += _axe(page, f"{live_server_url}{url}")
    assert not findings, "axe found serious or critical problems:\n" + "\n".join(findings)
    assert not errors, errors


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_it_follows_the_systems_dark_scheme_and_remembers_the_switch(live_server_url, page, owner):
    background = "() => getComputedStyle(document.body).backgroundColor"
    page.emulate_media(color_scheme="dark")
    log_in(page, live_server_url, owner.username)
    assert _is_dark(page.evaluate(background)), page.evaluate(background)
    assert page.get_attribute("html", "data-theme") is None  # the system's choice, nothing stored

    # Dark has its own contrast to keep: axe on two pages in it.
    assert not _axe(page, f"{live_server_url}{reverse('home')}") + _axe(page, f"{live_server_url}{reverse('run-new')}")

    page.click("#theme-switch")  # dark -> light, against the system
    assert page.get_attribute("html", "data-theme") == "light"
    assert not _is_dark(page.evaluate(background))
    page.add_init_script(THEME_AT_STYLESHEET)
    page.goto(f"{live_server_url}{reverse('run-list')}")
    # Remembered, and on <html> before the stylesheet is parsed (the inline script in <head>).
    assert page.evaluate("window.themeAtStylesheet") == "light"
    assert not _is_dark(page.evaluate(background))

    page.emulate_media(color_scheme="light")
    page.click("#theme-switch")  # light -> dark
    assert _is_dark(page.evaluate(background))
    assert page.evaluate("localStorage.getItem('workbench-theme')") == "dark"
    assert page.get_attribute("#theme-switch", "aria-pressed") == "true"


def _charted_dataset(owner) -> int:
    """A ready detection dataset with boxes counted per class and split and its label statistics
    on disk: its page charts them (a heatmap among them), and a new run's form charts the learning
    rate over a run on it (a batch of 32 needs training images)."""
    splits = {"train": {"count": 96, "class_counts": [64, 32]}, "val": {"count": 24, "class_counts": [12, 12]}}
    dataset = make_dataset_row(
        owner, name="charted", task="detection", labels=["car", "dog"], splits=splits, image_width=28,
        image_height=28, channels=3,
    )  # fmt: skip
    dataset.path.mkdir(parents=True)
    check = {"images": 120, "format": "kitti", "images_without_labels": 0, "classes": [], "report": {"counts": {}}}
    bins = {"edges": [0, 8, None], "counts": [3, 1]}
    stats = {"images_without_objects": 0, "box_width": bins, "box_height": bins, "box_aspect": bins,
             "objects_per_image": bins, "box_centres": [[0, 2], [1, 0]]}  # fmt: skip
    (dataset.path / "label_report.json").write_text(json.dumps(check))
    (dataset.path / "label_stats.json").write_text(json.dumps(stats))
    return dataset.pk


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_it_themes_the_charts_and_restyles_them_when_the_theme_changes(live_server_url, page, owner):
    run = off_the_loop(_with_data, owner)["run-detail"]
    dataset = off_the_loop(_charted_dataset, owner)
    page.emulate_media(color_scheme="dark")
    log_in(page, live_server_url, owner.username)
    # The run's charts, the dataset's counts and label statistics, the new run's learning-rate preview.
    heatmaps = 0
    for url in (run, reverse("dataset-detail", args=[dataset]), f"{reverse('run-new')}?dataset={dataset}"):
        page.goto(f"{live_server_url}{url}")
        page.wait_for_selector(".js-plotly-plot", timeout=30_000)
        heatmaps += page.evaluate(f"() => document.querySelectorAll('{HEATMAP}').length")
        assert page.evaluate(PAPERS_ARE, False), (url, page.evaluate(PAPERS))  # Plotly's own is "#fff"
        assert page.evaluate(EMPTY_CELLS_ARE_PAPER), url  # not a white block on the dark card
        page.click("#theme-switch")
        page.wait_for_function(PAPERS_ARE, arg=True)  # restyled by plotly_theme.js, not by a reload
        assert page.evaluate(EMPTY_CELLS_ARE_PAPER), url
        page.click("#theme-switch")  # dark again, for the next page
        page.wait_for_function(PAPERS_ARE, arg=False)
    assert heatmaps == 1, "the dataset's box centres were not drawn"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_it_lists_the_keyboard_shortcuts_on_question_mark_and_follows_them(live_server_url, page, owner):
    log_in(page, live_server_url, owner.username)
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    assert "Switches between the dark and the light theme" in page.inner_text("#shortcuts")
    page.keyboard.press("Escape")
    assert not page.locator("#shortcuts").is_visible()
    page.keyboard.press("g")
    page.keyboard.press("r")
    page.wait_for_url(f"{live_server_url}{reverse('run-list')}")
    # The first Tab reaches the skip link, which shows itself when focused.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.locator(".skip-link").bounding_box()["y"] >= 0


# Every chart's background on the page, and whether they all are light (true) or dark (false),
# as _is_dark reads one.
PAPERS = "() => [...document.querySelectorAll('.js-plotly-plot')].map((chart) => chart._fullLayout.paper_bgcolor)"
PAPERS_ARE = f"""(light) => ({PAPERS})().every((paper) => {{
  if (!paper.startsWith('rgb')) return false;  // not the theme's (a probe's colour is rgb())
  const [red, green, blue] = paper.match(/\\d+/g).map(Number);
  return ((red + green + blue) / 3 >= 80) === light;
}})"""
# A heatmap's lowest colour (an empty cell) is the chart's paper, in either theme.
HEATMAP = ".js-plotly-plot .heatmaplayer"
EMPTY_CELLS_ARE_PAPER = """() => [...document.querySelectorAll('.js-plotly-plot')].every((chart) => chart._fullData
  .filter((trace) => trace.type === 'heatmap')
  .every((trace) => trace.colorscale[0][1] === chart._fullLayout.paper_bgcolor))"""
# Records the theme on <html> when the first stylesheet appears in the document, before it paints.
THEME_AT_STYLESHEET = """new MutationObserver((_, observer) => {
  if (!document.querySelector('link[rel=stylesheet]')) return;
  window.themeAtStylesheet = document.documentElement.dataset.theme || null;
  observer.disconnect();
}).observe(document, { childList: true, subtree: true });"""


def _is_dark(css_colour: str) -> bool:
    red, green, blue = (int(part) for part in css_colour[css_colour.index("(") + 1 : -1].split(",")[:3])
    return (red + green + blue) / 3 < 80
