"""Sign-in through the lab's OpenID provider: mozilla-django-oidc's code flow with PKCE, its
endpoints read from the provider's discovery document, the ID token's signature (the provider's
JWKS), nonce, issuer, audience and expiry checked, the account named by `preferred_username`,
and the groups claim mapped to projects, roles and staff as LDAP's groups are
(docs/design.md, "Sign-in through the lab's directory")."""

from __future__ import annotations

import json
import logging
import re
import time
import urllib.request

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.utils.text import slugify
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from workbench.directory.mapping import account_for, apply_groups, parse_group_map, refresh_profile

log = logging.getLogger(__name__)
DISCOVERY_SECONDS = 3600
# mozilla-django-oidc's settings that come from the discovery document, by its key there.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_discovery: dict = {}


def oidc_enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def discovery() -> dict:
    """The provider's /.well-known/openid-configuration, read again every hour."""
    if (
        _discovery.get("issuer_url") != settings.OIDC_ISSUER
        or time.time() - _discovery.get("at", 0) > DISCOVERY_SECONDS
    ):
        url = settings.OIDC_ISSUER.rstrip("/") + "/.well-known/openid-configuration"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (the operator's URL)
                document = json.load(answer)
        except (OSError, ValueError) as error:
            raise ImproperlyConfigured(
                f"the OpenID provider's discovery did not answer: {type(error).__name__}"
            ) from None
        _discovery.clear()
        _discovery.update(document=document, at=time.time(), issuer_url=settings.OIDC_ISSUER)
    return _discovery["document"]


def _setting(attr: str, *default):
    if attr in DISCOVERED:
        return discovery()[DISCOVERED[attr]]
    return import_from_settings(attr, *default)


class DiscoveredRequestView(OIDCAuthenticationRequestView):
    """The redirect to the provider, to its discovered authorization endpoint."""

    get_settings = staticmethod(_setting)


class DirectoryOIDCBackend(OIDCAuthenticationBackend):
    get_settings = staticmethod(_setting)

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)  # signature (JWKS) and nonce
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if payload.get("iss") != discovery().get("issuer"):
            raise SuspiciousOperation("the ID token's issuer is not the provider's")
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token is not for this workbench")
        if float(payload.get("exp", 0)) < time.time():
            raise SuspiciousOperation("the ID token has expired")
        return payload

    def get_or_create_user(self, access_token, id_token, payload):
        # The account of this issuer's `sub` (the pair OpenID Connect makes unique), never one
        # found by a username or an email the provider lets its users change.
        claims = self.get_userinfo(access_token, id_token, payload)
        if claims.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the userinfo is not the ID token's user")
        key = f"{payload['iss']} {payload['sub']}"
        return account_for(source="oidc", key=key, username=_username(claims),
                           refresh=lambda user: self.update_user(user, claims))  # fmt: skip

    def update_user(self, user, claims):
        refresh_profile(user, email=claims.get("email", ""), first_name=claims.get("given_name", ""),
                        last_name=claims.get("family_name", ""))  # fmt: skip
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        apply_groups(user, [str(group) for group in groups], parse_group_map(settings.DIRECTORY_GROUPS),
                     directory_account=True)  # fmt: skip
        return user


def _username(claims: dict) -> str:
    """The provider's username when Django takes it as one (letters, digits, @.+-_), else its slug."""
    name = str(claims.get("preferred_username") or claims.get("sub") or "")[:150]
    username = name if re.fullmatch(r"[\w.@+-]+", name) else slugify(name)
    if not username:
        raise SuspiciousOperation("the provider named no user")
    return username
