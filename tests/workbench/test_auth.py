import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse

from tests.conftest import PASSWORD

PAGES = ["home", "dataset-list", "run-list", "gpus", "password_change"]


@pytest.fixture(autouse=True)
def clear_throttle():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES)
def test_it_redirects_anonymous_visitors_to_login(client, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response.url == f"{reverse('login')}?next={url}"


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["api-me", "api-workers"])
def test_it_refuses_anonymous_api_calls(client, name):
    assert client.get(reverse(name)).status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES)
def test_it_shows_pages_to_a_logged_in_user(owner_client, name):
    assert owner_client.get(reverse(name)).status_code == 200


def test_it_logs_in_and_out(client, owner):
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("home")).status_code == 200
    client.post(reverse("logout"))
    assert client.get(reverse("home")).status_code == 302


def test_it_locks_an_account_after_repeated_failures(client, owner, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    for _ in range(3):
        response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
        assert "Please enter a correct username and password" in response.content.decode()
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert "Too many failed sign-in attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_it_throttles_unknown_accounts_the_same_way(client, db, settings):
    # Same count, same message: the throttle does not tell which accounts exist.
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    for _ in range(3):
        client.post(reverse("login"), {"username": "nobody", "password": "wrong"})
    response = client.post(reverse("login"), {"username": "nobody", "password": "wrong"})
    assert "Too many failed sign-in attempts" in response.content.decode()


def test_it_throttles_per_address_across_accounts(client, owner, settings):
    settings.LOGIN_FAILURES_PER_IP = 4
    for index in range(4):
        client.post(reverse("login"), {"username": f"guess{index}", "password": "wrong"})
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert "Too many failed sign-in attempts" in response.content.decode()
    other_address = client.post(reverse("login"), {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.9.9.9")
    assert other_address.status_code == 302


def test_it_issues_api_tokens_and_accepts_them(client, owner):
    response = client.post(reverse("api-token"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 200
    token = response.json()["token"]
    me = client.get(reverse("api-me"), HTTP_AUTHORIZATION=f"Token {token}")
    assert me.json() == {"id": owner.pk, "username": "alice", "is_staff": False}
    assert client.get(reverse("api-me"), HTTP_AUTHORIZATION="Token not-a-token").status_code == 401


def test_it_throttles_the_token_endpoint(client, owner, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 2
    for _ in range(2):
        assert client.post(reverse("api-token"), {"username": "alice", "password": "x"}).status_code == 400
    response = client.post(reverse("api-token"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 429


def test_it_changes_the_password(owner_client):
    response = owner_client.post(
        reverse("password_change"),
        {"old_password": PASSWORD, "new_password1": "new-long-passphrase-9", "new_password2": "new-long-passphrase-9"},
    )
    assert response.status_code == 302
    user = get_user_model().objects.get(username="alice")
    assert user.check_password("new-long-passphrase-9")


@pytest.mark.django_db
def test_it_offers_the_first_admin_page_only_while_no_account_exists(client):
    assert b"Create the first (administrator) account" in client.get(reverse("login")).content
    response = client.post(
        reverse("first-admin"),
        {"username": "root", "email": "", "password1": "a-long-passphrase-1", "password2": "a-long-passphrase-1"},
    )
    assert response.status_code == 302
    admin = get_user_model().objects.get()
    assert admin.is_superuser and admin.is_staff
    client.logout()
    assert client.get(reverse("first-admin")).status_code == 404
    assert b"Create the first" not in client.get(reverse("login")).content


def test_it_hides_the_admin_link_from_non_staff(owner_client, client, staff_user):
    assert b'href="/admin/"' not in owner_client.get(reverse("home")).content
    client.force_login(staff_user)
    assert b'href="/admin/"' in client.get(reverse("home")).content


@override_settings(LOGIN_FAILURES_PER_ACCOUNT=2)
def test_it_resets_the_account_count_after_a_success(client, owner):
    for _ in range(2):
        client.post(reverse("login"), {"username": "alice", "password": "wrong"})
        assert client.post(reverse("login"), {"username": "alice", "password": PASSWORD}).status_code == 302
        client.logout()


WRONG_ATTEMPTS = 30


def _admin_login(client, password: str):
    return client.post(reverse("admin:login"), {"username": "carol", "password": password, "next": "/admin/"})


def _assert_locked_everywhere(client):
    """The right password is refused on every way in while the account is locked."""
    page = client.post(reverse("login"), {"username": "carol", "password": PASSWORD})
    assert "Too many failed sign-in attempts" in page.content.decode()
    assert client.post(reverse("api-token"), {"username": "carol", "password": PASSWORD}).status_code == 429
    admin_page = _admin_login(client, PASSWORD)
    assert admin_page.status_code == 200  # the form again, not the redirect into the admin
    assert "Too many failed sign-in attempts" in admin_page.content.decode()
    assert "_auth_user_id" not in client.session


def test_it_counts_admin_login_failures_for_every_way_in(client, staff_user):
    for _ in range(WRONG_ATTEMPTS):
        assert _admin_login(client, "wrong").status_code == 200
    _assert_locked_everywhere(client)


@pytest.mark.parametrize("way_in", ["login", "api-token"])
def test_it_locks_the_admin_login_after_failures_elsewhere(client, staff_user, way_in):
    for _ in range(WRONG_ATTEMPTS):
        client.post(reverse(way_in), {"username": "carol", "password": "wrong"})
    _assert_locked_everywhere(client)


def test_it_lets_staff_into_the_admin_when_not_locked(client, staff_user):
    response = _admin_login(client, PASSWORD)
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def test_it_throttles_in_the_authentication_backend_itself(rf, owner, settings):
    # Any future way in that calls django.contrib.auth.authenticate() (DRF basic auth, a new
    # view, a websocket login) is counted and refused without doing anything itself.
    from django.contrib.auth import authenticate

    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    for _ in range(3):
        assert authenticate(rf.post("/"), username="alice", password="wrong") is None
    assert authenticate(rf.post("/"), username="alice", password=PASSWORD) is None
    assert authenticate(rf.post("/", REMOTE_ADDR="10.1.2.3"), username="alice", password=PASSWORD) is None


def test_it_counts_attempts_still_in_flight(rf, owner, settings):
    # Parallel guesses: each is counted before its password hash runs, so attempts that have not
    # finished yet already use up the allowance and the next one is refused, right or wrong.
    from django.contrib.auth import authenticate

    from workbench import throttle

    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    for _ in range(3):  # three attempts begun at the same moment, their hashes still running
        assert throttle.attempt_allowed(username="alice", ip="10.0.0.1")
    assert authenticate(rf.post("/", REMOTE_ADDR="10.0.0.2"), username="alice", password=PASSWORD) is None


def test_it_gives_an_address_its_attempt_back_on_success(rf, owner, other_user, settings):
    # A lab behind one address signs in many times a day: right passwords do not use it up.
    from django.contrib.auth import authenticate

    settings.LOGIN_FAILURES_PER_IP = 2
    for _ in range(5):
        assert authenticate(rf.post("/", REMOTE_ADDR="10.9.9.9"), username="alice", password=PASSWORD) is not None


def test_it_throttles_guesses_of_the_current_password_when_changing_it(owner_client, owner, settings):
    from django.test import Client

    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    new = "new-long-passphrase-9"
    wrong = {"old_password": "guess", "new_password1": new, "new_password2": new}
    for _ in range(3):
        page = owner_client.post(reverse("password_change"), wrong)
        assert page.status_code == 200 and "incorrect" in page.content.decode()
    right = {**wrong, "old_password": PASSWORD}
    page = owner_client.post(reverse("password_change"), right)
    assert "Too many failed sign-in attempts" in page.content.decode()
    assert get_user_model().objects.get(username="alice").check_password(PASSWORD)  # unchanged
    login = Client().post(reverse("login"), {"username": "alice", "password": PASSWORD})  # signed out
    assert "Too many failed sign-in attempts" in login.content.decode()


def test_it_sends_the_admins_password_change_to_the_throttled_form(client, staff_user):
    client.force_login(staff_user)
    response = client.get("/admin/password_change/")
    assert response.status_code == 302 and response["Location"] == reverse("password_change")
