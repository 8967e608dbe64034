"""A real OpenID provider for the sign-in tests: django-oauth-toolkit with OpenID Connect on, in a
process of its own (tests/support/oidc_provider/__main__.py). Its data lives in OIDC_PROVIDER_DIR."""

import os
from pathlib import Path

FOLDER = Path(os.environ["OIDC_PROVIDER_DIR"])
SECRET_KEY = "the test provider's own key, never a workbench's" * 2
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": FOLDER / "provider.sqlite3"}}
USE_TZ = True
# A browser keeps cookies per host, not per port: the workbench on 127.0.0.1 beside this provider
# would lose its session (and the sign-in's state in it) to a provider's cookie of the same name.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"
LOGIN_URL = "/accounts/login/"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (FOLDER / "key.pem").read_text(),
    "PKCE_REQUIRED": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.claims.GroupsValidator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "profile", "email": "email"},
}
