"""Reads of the store: what a user may start from (every user: the store is shared), and the
Weights page's picture per network."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from workbench.weights.catalog import Published, published_for
from workbench.weights.models import StoredWeights


def weights_usable() -> QuerySet[StoredWeights]:
    return StoredWeights.objects.all()


def weights_for_networks() -> list[StoredWeights]:
    """What the new-run form offers (each network's on its own): filed weights whose file is there."""
    return [row for row in StoredWeights.objects.all() if row.present]


@dataclass
class NetworkWeights:
    network: str
    present: list[StoredWeights] = field(default_factory=list)
    missing: list[Published] = field(default_factory=list)  # published, not here: what to drop in


def weights_overview(networks: list[str]) -> list[NetworkWeights]:
    rows: dict[str, list[StoredWeights]] = {}
    for row in StoredWeights.objects.all():
        if row.present:
            rows.setdefault(row.network, []).append(row)
    overview = []
    for network in networks:
        present = rows.get(network, [])
        have = {row.tag for row in present if row.source != StoredWeights.Source.LOCAL}
        missing = [item for item in published_for(network) if item.tag not in have]
        overview.append(NetworkWeights(network, present, missing))
    return overview
