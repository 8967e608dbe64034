"""The page scripts: ES modules only, and one module (static/workbench/http.js) that talks to the
server, so the CSRF token and the reading of the server's errors have one home."""

from __future__ import annotations

import re

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


def test_it_provides_the_csrf_token_to_every_page_from_the_base_template():
    base = (REPO_ROOT / "templates" / "base.html").read_text()
    assert '<meta name="csrf-token" content="{{ csrf_token }}">' in base
    assert 'querySelector("meta[name=csrf-token]")' in HTTP.read_text()
