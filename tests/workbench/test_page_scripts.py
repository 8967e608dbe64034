"""The page scripts: ES modules only, and one module (static/workbench/http.js) that talks to the
server, so the CSRF token and the reading of the server's errors have one home."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT

STATIC = REPO_ROOT / "static"
HTTP = STATIC / "workbench" / "http.js"
SCRIPT_TAG = re.compile(r"<script\b[^>]*\bsrc=\"\{% static '([^']+)' %\}\"[^>]*>")
# What only http.js may do: send requests, and know how the CSRF token travels.
SERVER_TALK = re.compile(r"\bfetch\(|XMLHttpRequest|X-CSRFToken|csrftoken|csrfmiddlewaretoken|document\.cookie")


def page_scripts():
    for template in sorted((REPO_ROOT / "templates").rglob("*.html")):
        for match in SCRIPT_TAG.finditer(template.read_text()):
            if not match.group(1).startswith("vendor/"):  # Plotly: vendored classic scripts
                yield template.relative_to(REPO_ROOT), match.group(1), match.group(0)


def own_scripts():
    return [path for path in sorted(STATIC.rglob("*.js")) if "vendor" not in path.relative_to(STATIC).parts]


def test_it_loads_every_page_script_as_an_es_module():
    scripts = list(page_scripts())
    assert len(scripts) >= 10, scripts  # the pattern still finds the templates' script tags
    classic = [f"{template}: {src}" for template, src, tag in scripts if 'type="module"' not in tag]
    assert not classic, classic


def test_it_talks_to_the_server_only_through_the_http_module():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in own_scripts()
        if path != HTTP
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SERVER_TALK.search(line)
    ]
    assert not offenders, offenders


SOCKET = STATIC / "workbench" / "socket.js"


def test_it_opens_websockets_only_through_the_socket_module():
    # Six sockets on five pages had each their own copy of open, reconnect and (on the run page)
    # "since": two retried every 2 s, three with a backoff. static/workbench/socket.js is the one;
    # the run page's head (a template's classic script) opens its socket before any module loads
    # and hands it over.
    openers = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in own_scripts()
        if path != SOCKET
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bnew WebSocket\(", line)
    ]
    assert not openers, openers
    users = [path.relative_to(STATIC).as_posix() for path in own_scripts() if 'socket.js"' in path.read_text()]
    assert sorted(users) == [
        "benchmarks/detail.js",
        "datasets/detail.js",
        "runs/run_stream.js",
        "searches/search_detail.js",
        "workbench/home.js",
    ]


def test_it_provides_the_csrf_token_to_every_page_from_the_base_template():
    base = (REPO_ROOT / "templates" / "base.html").read_text()
    assert '<meta name="csrf-token" content="{{ csrf_token }}">' in base
    assert 'querySelector("meta[name=csrf-token]")' in HTTP.read_text()


# Pages whose Plotly traces and axes carry only the workbench's own words (metric names, network
# names, "lr=0.1 bs=32"); every other page that draws with Plotly shows user text and escapes it.
# A search's figures are Optuna's, over parameter names and values that passed the run validators
# (trainer field paths, numbers, known choices): no free text reaches them.
PLOTLY_OWN_WORDS = {
    "runs/charts.js",
    "runs/run_detail.js",
    "runs/schedule_preview.js",  # the learning rate per sweep combination ("lr=0.1 bs=32")
    "benchmarks/detail.js",
    "searches/search_detail.js",
}
PLOTLY_TEXT = STATIC / "workbench" / "plotly_text.js"


def test_it_escapes_user_labels_for_plotly_on_every_page_that_draws_them():
    drawing = [p for p in own_scripts() if re.search(r"Plotly\.(react|newPlot)\(", p.read_text())]
    assert len(drawing) >= 6, drawing
    unescaped = [
        str(path.relative_to(STATIC))
        for path in drawing
        if str(path.relative_to(STATIC)) not in PLOTLY_OWN_WORDS and "/workbench/plotly_text.js" not in path.read_text()
    ]
    assert not unescaped, unescaped


def test_it_turns_markup_and_quotes_into_entities_plotly_decodes_back():
    # Playwright's own Node runs the module as the browser would (an ES module, no build step).
    import playwright

    node = Path(playwright.__file__).parent / "driver" / "node"
    labels = ["<a href='https://evil.example/'>link</a>", '<span style="font-size:300px">x</span>', "a & b", 7, None]
    script = (
        f"import {{ plotlyTexts }} from {json.dumps(PLOTLY_TEXT.as_uri())};"
        f"console.log(JSON.stringify(plotlyTexts({json.dumps(labels)})));"
    )
    out = subprocess.run([str(node), "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        "&lt;a href=&#39;https://evil.example/&#39;&gt;link&lt;/a&gt;",
        "&lt;span style=&#34;font-size:300px&#34;&gt;x&lt;/span&gt;",
        "a &amp; b",
        "7",
        "",
    ]
