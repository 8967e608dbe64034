"""Which directory account a local account is: made by one source (LDAP or an OpenID provider)
for one identity there, and answered for by that identity alone (never by a namesake)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ExternalIdentity(models.Model):
    class Source(models.TextChoices):
        LDAP = "ldap", "LDAP directory"
        OIDC = "oidc", "OpenID provider"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    source = models.CharField(max_length=8, choices=Source.choices)
    # LDAP: the user's DN (lower-case); OpenID Connect: "<issuer> <sub>", the pair the spec makes unique.
    key = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "key"], name="one_account_per_identity")]

    def __str__(self) -> str:
        return f"{self.user} = {self.source} {self.key}"
