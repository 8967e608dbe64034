"""Sign-in through a real OpenID provider (django-oauth-toolkit in a process of its own,
tests/support/oidc_provider): discovery, the code flow with PKCE, the ID token checked, the
account it makes and its groups mapped to a project and staff; refusals."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client

from tests.support.oidc_server import oidc_provider
from workbench.audit.models import AuditEntry
from workbench.directory import oidc
from workbench.projects.models import Membership, Project

pytestmark = pytest.mark.django_db
CALLBACK = "http://testserver/oidc/callback/"


@pytest.fixture(scope="module")
def provider():
    with oidc_provider(CALLBACK) as running:
        yield running


@pytest.fixture
def lab(settings, provider):
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = provider.client_id, provider.client_secret
    settings.DIRECTORY_GROUPS = "vision -> vision-lab:viewer; admins -> staff"
    oidc._discovery.clear()
    return Project.objects.create(name="Vision lab", slug="vision-lab")


def _provider_code(start: str, *, password: str = "olga-password") -> str:
    """What a browser does at the provider: the authorize URL, its login page, back with a code."""
    browser = requests.Session()
    answer = browser.get(start, allow_redirects=True)
    token = browser.cookies["provider_csrftoken"]
    form = {"username": "olga", "password": password, "csrfmiddlewaretoken": token,
            "next": parse_qs(urlsplit(answer.url).query)["next"][0]}  # fmt: skip
    back = browser.post(answer.url, data=form, headers={"Referer": answer.url}, allow_redirects=False)
    while back.status_code in (301, 302) and not back.headers["Location"].startswith(CALLBACK):
        back = browser.get(requests.compat.urljoin(back.url, back.headers["Location"]), allow_redirects=False)
    return back.headers.get("Location", "")


def test_it_signs_in_through_the_provider_with_pkce_and_maps_the_groups(lab, django_user_model):
    workbench = Client()
    start = workbench.get("/oidc/authenticate/")
    assert start.status_code == 302
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["redirect_uri"] == [CALLBACK]
    callback = _provider_code(start["Location"])
    assert callback.startswith(CALLBACK + "?code="), callback
    landed = workbench.get(callback.removeprefix("http://testserver"))
    assert landed.status_code == 302 and landed["Location"] == "/"
    olga = django_user_model.objects.get(username="olga")
    assert (olga.email, olga.first_name, olga.is_staff, olga.has_usable_password()) == (
        "olga@lab.example",
        "Olga",
        True,
        False,
    )
    assert Membership.objects.get(user=olga).project == lab
    assert workbench.get("/projects/vision-lab/").status_code == 200
    assert AuditEntry.objects.filter(action="signin", actor_name="olga").exists()
    given = AuditEntry.objects.get(action="project.member_set", actor_name="olga")
    assert (given.door, given.after) == ("page", {"user": "olga", "role": "viewer", "source": "directory"})


def test_it_refuses_a_callback_whose_state_it_never_sent(lab):
    workbench = Client()
    answer = workbench.get("/oidc/callback/", {"code": "forged", "state": "forged"})
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/?signin=failed"
    assert "did not succeed" in workbench.get(answer["Location"]).content.decode()


def test_it_never_lets_the_provider_answer_for_a_local_account(lab, django_user_model):
    django_user_model.objects.create_user("olga", password="a local password 1234")
    workbench = Client()
    start = workbench.get("/oidc/authenticate/")
    landed = workbench.get(_provider_code(start["Location"]).removeprefix("http://testserver"))
    assert landed["Location"] == "/accounts/login/?signin=failed"


def test_it_has_no_provider_doors_without_an_issuer(settings):
    settings.OIDC_ISSUER = ""
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert "Sign in with" not in Client().get("/accounts/login/").content.decode()


def test_it_offers_the_provider_on_the_login_page(lab):
    assert "Sign in with the lab&#x27;s sign-in" in Client().get("/accounts/login/").content.decode()


def test_it_never_lets_the_provider_answer_for_an_account_it_did_not_make(lab, django_user_model):
    django_user_model.objects.create_user("olga", is_superuser=True)  # no password: not the provider's olga
    workbench = Client()
    start = workbench.get("/oidc/authenticate/")
    landed = workbench.get(_provider_code(start["Location"]).removeprefix("http://testserver"))
    assert landed["Location"] == "/accounts/login/?signin=failed"
