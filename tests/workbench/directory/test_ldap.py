"""Sign-in through a real LDAP directory (Debian's slapd, tests/support/ldap_server.py): the
login page and the API's token, the account it makes, groups mapped to projects, roles and
staff at every sign-in, the throttle, and what it refuses."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from tests.support.ldap_server import ldap_directory
from workbench.audit.models import AuditEntry
from workbench.directory.mapping import parse_group_map
from workbench.projects.models import Membership, Project

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def directory():
    with ldap_directory() as running:
        yield running


@pytest.fixture
def lab(settings, directory, django_user_model):
    settings.LDAP_URL = directory.url
    settings.LDAP_USER_DN = "uid={username},ou=people,dc=lab,dc=example"
    settings.LDAP_GROUP_BASE = "ou=groups,dc=lab,dc=example"
    settings.DIRECTORY_GROUPS = (
        f"{directory.group('vision')} -> vision-lab:editor; {directory.group('vision-readers')} -> vision-lab:viewer; "
        f"{directory.group('admins')} -> staff; {directory.group('vision')} -> no-such-project:viewer"
    )
    return Project.objects.create(name="Vision lab", slug="vision-lab")


def _sign_in(username: str, password: str) -> Client:
    client = Client()
    answer = client.post("/accounts/login/", {"username": username, "password": password})
    client.signed_in = answer.status_code == 302
    return client


def test_it_signs_a_directory_user_in_and_lands_them_in_their_groups_project(lab, django_user_model):
    client = _sign_in("dora", "dora-password")
    assert client.signed_in
    dora = django_user_model.objects.get(username="dora")
    assert (dora.email, dora.first_name, dora.has_usable_password(), dora.is_staff) == (
        "dora@lab.example",
        "Dora",
        False,
        True,
    )
    membership = Membership.objects.get(user=dora)
    assert (membership.project, membership.role, membership.from_directory) == (lab, "editor", True)
    assert client.get("/projects/vision-lab/").status_code == 200
    assert AuditEntry.objects.filter(action="signin", actor_name="dora").exists()
    assert AuditEntry.objects.filter(action="project.member_set", after__source="directory").exists()


def test_it_follows_the_groups_at_each_sign_in_and_leaves_hand_given_memberships(lab, settings, django_user_model):
    assert _sign_in("eve", "eve-password").signed_in
    eve = django_user_model.objects.get(username="eve")
    assert Membership.objects.get(user=eve).role == "viewer" and not eve.is_staff
    other = Project.objects.create(name="Other", slug="other")
    Membership.objects.create(project=other, user=eve, role="admin")  # given by hand
    settings.DIRECTORY_GROUPS = ""  # eve's group no longer maps anywhere
    assert _sign_in("eve", "eve-password").signed_in
    assert list(Membership.objects.filter(user=eve).values_list("project__slug", "role")) == [("other", "admin")]


def test_it_refuses_a_wrong_or_empty_password_and_a_local_accounts_namesake(lab, django_user_model):
    assert not _sign_in("dora", "wrong").signed_in
    assert not _sign_in("dora", "").signed_in
    django_user_model.objects.create_user("eve", password="a local password 1234")
    assert not _sign_in("eve", "eve-password").signed_in  # the directory never answers for a local account
    assert _sign_in("eve", "a local password 1234").signed_in


def test_it_throttles_directory_sign_ins_like_every_other(lab, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 2
    for _ in range(2):
        assert not _sign_in("dora", "wrong").signed_in
    refused = Client().post("/accounts/login/", {"username": "dora", "password": "dora-password"})
    assert refused.status_code == 200 and "Too many failed sign-in attempts" in refused.content.decode()


def test_it_gives_a_token_to_a_directory_user(lab):
    answer = Client().post("/api/auth/token/", {"username": "dora", "password": "dora-password"})
    assert answer.status_code == 200 and answer.json()["token"]


def test_it_signs_local_accounts_in_when_the_directory_is_down(settings, django_user_model):
    settings.LDAP_URL = "ldap://127.0.0.1:1"
    django_user_model.objects.create_user("local", password="a local password 1234")
    assert _sign_in("local", "a local password 1234").signed_in
    assert not _sign_in("dora", "dora-password").signed_in


def test_it_reads_the_group_mapping_and_names_a_bad_entry(settings):
    mapping = parse_group_map("CN=Vision,ou=groups -> vision-lab:editor; admins -> staff")
    assert mapping.projects == {"cn=vision,ou=groups": [("vision-lab", "editor")]} and mapping.staff == {"admins"}
    with pytest.raises(ValueError, match="'vision -> vision-lab:boss': the role is one of viewer, editor, admin"):
        parse_group_map("vision -> vision-lab:boss")
    settings.DIRECTORY_GROUPS = "vision vision-lab"
    with pytest.raises(SystemCheckError, match="WORKBENCH_DIRECTORY_GROUPS: 'vision vision-lab'"):
        call_command("check")


def test_it_never_answers_for_an_account_it_did_not_make(lab, django_user_model):
    # An account staff made with no password (or another source made) is not the directory's
    # "dora": the directory answers only for the accounts it made, by their DN.
    django_user_model.objects.create_user("dora", is_superuser=True, is_staff=True)
    assert not _sign_in("dora", "dora-password").signed_in
    assert _sign_in("eve", "eve-password").signed_in
    assert _sign_in(" EVE", "eve-password").signed_in  # the directory's name, however typed: one account
    assert django_user_model.objects.filter(username__iexact="eve").count() == 1
