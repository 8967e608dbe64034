"""The lab's groups as projects, roles and staff: one mapping for every directory (LDAP's group
DNs, OpenID Connect's group names), and bringing a user's memberships in line with their groups.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction

from workbench.audit import services as audit
from workbench.core.groups import publish_access_changed
from workbench.core.ownership import ROLES
from workbench.directory.models import ExternalIdentity
from workbench.projects.models import Membership, Project

log = logging.getLogger(__name__)
STAFF = "staff"


@dataclass(frozen=True)
class GroupMap:
    """group -> (project slug, role) or staff, as `WORKBENCH_DIRECTORY_GROUPS` says."""

    projects: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    staff: frozenset[str] = frozenset()


def parse_group_map(text: str) -> GroupMap:
    """`group -> project:role; group -> staff` (a group may appear more than once); ValueError
    names the entry that is not one of those."""
    projects: dict[str, list[tuple[str, str]]] = {}
    staff = set()
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        group, arrow, target = entry.partition("->")
        group, target = group.strip().lower(), target.strip()
        if not arrow or not group or not target:
            raise ValueError(f"{entry!r}: write 'group -> project:role' or 'group -> staff'")
        if target == STAFF:
            staff.add(group)
            continue
        slug, _, role = target.partition(":")
        if role not in ROLES:
            raise ValueError(f"{entry!r}: the role is one of {', '.join(ROLES)}")
        projects.setdefault(group, []).append((slug.strip(), role))
    return GroupMap(projects=projects, staff=frozenset(staff))


def wanted_memberships(groups: list[str], mapping: GroupMap) -> dict[str, str]:
    """project slug -> the highest role any of the groups gives."""
    wanted: dict[str, str] = {}
    for group in (g.lower() for g in groups):
        for slug, role in mapping.projects.get(group, []):
            if slug not in wanted or ROLES.index(role) > ROLES.index(wanted[slug]):
                wanted[slug] = role
    return wanted


def apply_groups(user, groups: list[str], mapping: GroupMap, *, directory_account: bool) -> None:
    """Brings the memberships the directory gave in line with `groups`; staff follows the mapping
    for an account the directory made (`directory_account`)."""
    wanted = wanted_memberships(groups, mapping)
    removed = False
    with transaction.atomic():
        existing = {m.project.slug: m for m in Membership.objects.filter(user=user).select_related("project")}
        for slug, role in wanted.items():
            project = Project.objects.filter(slug=slug).first()
            if project is None:
                log.warning("the directory's groups name project %r, which does not exist: skipped", slug)
                continue
            membership = existing.get(slug)
            if membership is None:
                Membership.objects.create(project=project, user=user, role=role, from_directory=True)
                _audit(user, project, before=None, role=role)
            elif membership.from_directory and membership.role != role:
                _audit(user, project, before=membership.role, role=role)
                Membership.objects.filter(pk=membership.pk).update(role=role)
        for slug, membership in existing.items():
            if membership.from_directory and slug not in wanted:
                _audit(user, membership.project, before=membership.role, role=None)
                membership.delete()
                removed = True
        is_staff = any(group.lower() in mapping.staff for group in groups)
        if directory_account and user.is_staff != is_staff:
            removed = removed or not is_staff  # what they saw as staff alone, their sockets included
            user.is_staff = is_staff
            user.save(update_fields=["is_staff"])
            audit.record(action="user.staff", actor=user, target_kind="user", target_id=user.pk,
                         target_name=user.get_username(), after={"staff": is_staff, "source": "directory"})  # fmt: skip
    if removed:
        transaction.on_commit(lambda: publish_access_changed(user.pk))


def _audit(user, project: Project, *, before: str | None, role: str | None) -> None:
    action = "project.member_remove" if role is None else "project.member_set"
    audit.record(
        action=action, actor=user, target=project,
        before=None if before is None else {"user": user.get_username(), "role": before, "source": "directory"},
        after=None if role is None else {"user": user.get_username(), "role": role, "source": "directory"},
    )  # fmt: skip


def account_for(*, source: str, key: str, username: str, refresh) -> object | None:
    """The local account of this directory identity: the one it made before, else a new one named
    `username`; None when that name is another account's (a local one, or another source's): a
    namesake never answers for an account, nor for an inactive one. `refresh(user)` brings the
    account's name, mail and groups in line."""
    identity = ExternalIdentity.objects.select_related("user").filter(source=source, key=key).first()
    if identity is not None:
        return refresh(identity.user) if identity.user.is_active else None
    users = get_user_model().objects
    if users.filter(username__iexact=username).exists():
        log.warning("%s sign-in refused: %r is another account's name", source, username)
        return None
    with transaction.atomic():
        user = users.create_user(username=username)  # no usable password: only the directory answers for it
        ExternalIdentity.objects.create(user=user, source=source, key=key)
    return refresh(user)


def refresh_profile(user, *, email: str, first_name: str, last_name: str) -> None:
    """The account's mail and names as the directory has them now (a value it left empty is kept)."""
    fields = {"email": email, "first_name": first_name, "last_name": last_name}
    changed = [name for name, value in fields.items() if value and getattr(user, name) != value]
    for name in changed:
        setattr(user, name, fields[name])
    if changed:
        user.save(update_fields=changed)
