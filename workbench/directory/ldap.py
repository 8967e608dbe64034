"""Checking a password against the lab's LDAP directory with ldap3, and the account it answers
for (docs/design.md, "Sign-in through the lab's directory"). Called by the throttled backend
(workbench/throttle.py) after the local password, never on its own."""

from __future__ import annotations

import logging

import ldap3
from django.conf import settings
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn

from workbench.directory.mapping import account_for, apply_groups, parse_group_map, refresh_profile

log = logging.getLogger(__name__)
TIMEOUT_SECONDS = 5


def ldap_enabled() -> bool:
    return bool(settings.LDAP_URL)


def ldap_authenticate(username: str, password: str):
    """The local account of the directory's `username` when `password` is theirs, else None.
    A directory that does not answer is None too (logged): the local accounts still sign in."""
    username = username.strip().lower()  # as the directory compares names: "Alice " is alice
    if not ldap_enabled() or not password or not username:
        return None  # an empty password would be an anonymous bind, which LDAP accepts
    dn = settings.LDAP_USER_DN.format(username=escape_rdn(username))
    server = ldap3.Server(settings.LDAP_URL, connect_timeout=TIMEOUT_SECONDS)
    try:
        connection = ldap3.Connection(server, user=dn, password=password, receive_timeout=TIMEOUT_SECONDS)
        if not connection.bind():
            return None
        person = _read(connection, dn)
        groups = _groups(connection, dn)
        connection.unbind()
    except LDAPException as error:
        log.warning("the LDAP directory did not answer: %s", type(error).__name__)
        return None

    def refresh(user):
        refresh_profile(user, email=person.get("mail", ""), first_name=person.get("givenName", ""),
                        last_name=person.get("sn", ""))  # fmt: skip
        apply_groups(user, groups, parse_group_map(settings.DIRECTORY_GROUPS), directory_account=True)
        return user

    return account_for(source="ldap", key=dn.lower(), username=username, refresh=refresh)


def _read(connection: ldap3.Connection, dn: str) -> dict:
    connection.search(dn, "(objectClass=*)", search_scope=ldap3.BASE, attributes=["mail", "givenName", "sn", "cn"])
    if not connection.entries:
        return {}
    entry = connection.entries[0].entry_attributes_as_dict
    return {key: (values[0] if values else "") for key, values in entry.items()}


def _groups(connection: ldap3.Connection, dn: str) -> list[str]:
    if not settings.LDAP_GROUP_BASE:
        return []
    query = f"(&(objectClass=groupOfNames)(member={escape_filter_chars(dn)}))"
    connection.search(settings.LDAP_GROUP_BASE, query, search_scope=ldap3.SUBTREE, attributes=[])
    return [entry.entry_dn for entry in connection.entries]
