"""`python -m tests.support.oidc_provider PORT REDIRECT_URI`: sets up the provider's database in
OIDC_PROVIDER_DIR (a user `olga`, password `olga-password`, in the groups vision and admins; a
confidential client `workbench` / `workbench-secret` for REDIRECT_URI) and serves on 127.0.0.1:PORT."""

import os
import sys

import django
from django.core.management import call_command

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.oidc_provider.settings")


def main() -> None:
    port, redirect_uri = sys.argv[1], sys.argv[2]
    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import Group, User
    from oauth2_provider.models import Application

    olga = User.objects.create_user("olga", "olga@lab.example", "olga-password", first_name="Olga")
    olga.groups.set([Group.objects.create(name="vision"), Group.objects.create(name="admins")])
    Application.objects.create(
        name="workbench", client_id="workbench", client_secret="workbench-secret", redirect_uris=redirect_uri,
        client_type=Application.CLIENT_CONFIDENTIAL, authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        skip_authorization=True, algorithm=Application.RS256_ALGORITHM,
    )  # fmt: skip
    call_command("runserver", f"127.0.0.1:{port}", use_reloader=False, use_threading=True, skip_checks=True)


main()
