"""Django's admin pages, in the workbench's frame."""

from __future__ import annotations

import pytest

from tests.conftest import PASSWORD


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/admin/login/", "/admin/", "/admin/auth/user/", "/admin/auth/user/add/"])
def test_it_declares_the_workbench_icon_so_no_admin_page_asks_for_favicon_ico(client, django_user_model, path):
    admin = django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    if path != "/admin/login/":
        client.force_login(admin)
    html = client.get(path).content.decode()
    assert html.count('<link rel="icon" href="/static/workbench/favicon.svg" type="image/svg+xml">') == 1, html[:500]
