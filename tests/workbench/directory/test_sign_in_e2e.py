"""Sign-in through the lab's directory in Chromium: a web process of the workbench configured as
a lab configures it (the environment, both ways in at once) beside a real slapd and a real
OpenID provider; a user signs in through each and lands in the project their group maps to."""

from __future__ import annotations

import pytest

from tests.conftest import web_server
from tests.support.ldap_server import ldap_directory
from tests.support.oidc_server import oidc_provider
from workbench.audit.models import AuditEntry
from workbench.embedded_redis import free_port
from workbench.projects.models import Project

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def lab_url(django_db_setup):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with ldap_directory() as directory, oidc_provider(f"{url}/oidc/callback/") as provider:
        # The directory's groups are DNs, the provider's are names: one mapping holds both.
        groups = f"{directory.group('vision')} -> vision-lab:editor; vision -> vision-lab:viewer"
        with web_server(
            name="daphne-directory", port=port, WORKBENCH_LDAP_URL=directory.url,
            WORKBENCH_LDAP_USER_DN="uid={username},ou=people,dc=lab,dc=example",
            WORKBENCH_LDAP_GROUP_BASE="ou=groups,dc=lab,dc=example", WORKBENCH_DIRECTORY_GROUPS=groups,
            WORKBENCH_OIDC_ISSUER=provider.issuer, WORKBENCH_OIDC_CLIENT_ID=provider.client_id,
            WORKBENCH_OIDC_CLIENT_SECRET=provider.client_secret,
        ):  # fmt: skip
            yield url


def test_it_signs_in_through_ldap_and_openid_and_lands_each_in_their_groups_project(lab_url, page):
    Project.objects.create(name="Vision lab", slug="vision-lab")

    page.goto(f"{lab_url}/accounts/login/")
    page.fill("#id_username", "dora")
    page.fill("#id_password", "dora-password")
    page.click("form button[type=submit]")
    page.wait_for_url(f"{lab_url}/")
    page.goto(f"{lab_url}/projects/vision-lab/")
    page.wait_for_selector('[data-member="dora"]')

    page.context.clear_cookies()
    page.goto(f"{lab_url}/accounts/login/")
    page.click("text=Sign in with the lab's sign-in")
    page.wait_for_selector("#id_username")  # the provider's own login page
    assert not page.url.startswith(lab_url), page.url
    page.fill("#id_username", "olga")
    page.fill("#id_password", "olga-password")
    page.click("button")
    page.wait_for_url(f"{lab_url}/")
    page.goto(f"{lab_url}/projects/vision-lab/")
    page.wait_for_selector('[data-member="olga"]')
    members = page.inner_text("#project-members")
    assert "dora" in members and "olga" in members, members
    signed_in = AuditEntry.objects.filter(action="signin").values_list("actor_name", flat=True)
    assert sorted(signed_in) == ["dora", "olga"]
