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
class WeightsOverview:
    """The Weights page's picture: what is filed first (what a run can start from), then the
    catalogue of what the libraries publish and is not here, which runs to a hundred rows and more
    with timm and so is the page's second, folded part, filtered by `query`."""

    filed: list[StoredWeights]
    not_filed: list[Published]  # published, not here, matching the query: what to drop in
    not_filed_total: int  # before the query
    unpublished: list[str] = field(default_factory=list)  # networks no library publishes weights of


def _matches(item: Published, words: list[str]) -> bool:
    text = f"{item.network} {item.tag} {item.dataset} {item.source}".lower()
    return all(word in text for word in words)


def weights_overview(networks: list[str], *, query: str = "") -> WeightsOverview:
    filed = weights_for_networks()
    have = {(row.network, row.tag) for row in filed if row.source != StoredWeights.Source.LOCAL}
    not_filed, unpublished = [], []
    for network in networks:
        published = published_for(network)
        unpublished += [] if published else [network]
        not_filed += [item for item in published if (network, item.tag) not in have]
    words = query.lower().split()
    return WeightsOverview(
        filed=filed,
        not_filed=[item for item in not_filed if _matches(item, words)],
        not_filed_total=len(not_filed),
        unpublished=unpublished,
    )
