"""A search's request checked as runs before anything is made: the base request, then each value
of its space put into it, by the runs' own rules (network fit, trainer config, placement, who may
start from which weights). services.search_create calls it; the search's own fields (space,
strategy, budget) are validators.py's."""

from __future__ import annotations

from datasets.models import Dataset
from trainer.config import shown
from workbench.core.errors import RequestError
from workbench.runs import services as run_services
from workbench.runs.validators import check_pretrained, validate_trainer_config
from workbench.searches.validators import candidate_values, config_path, trial_request


def check_candidates(*, space: dict, network: str, config: dict, dataset: Dataset, request, owner, nodes) -> None:
    """Each value of the space (every choice, each range's two ends) makes a run the runs' own rules
    accept, refused under space.<name> before anything is queued: a network that cannot take the
    images or the base's weights, a batch that does not divide over the GPUs, a learning rate out
    of the trainer's range. A network is built once however many values keep it (the pre-flight's
    cache), and validators.MAX_CANDIDATES bounds the values."""
    reference = config.get("pretrained")
    # Weights named by the base are resolved (copied) once per trial run, not for each probe.
    base = {key: value for key, value in config.items() if key != "pretrained"}
    for name, spec in space.items():
        for value in candidate_values(spec):
            probe_network, probe = trial_request(network=network, config=base, params={name: value})
            # The base's weights, or the value's when the space searches over weights.
            weights = probe.pop("pretrained", reference)
            try:
                _check_run_config(probe, network=probe_network, reference=weights, request=request, owner=owner,
                                  nodes=nodes, dataset=dataset)  # fmt: skip
            except RequestError as error:
                where = config_path(name)
                pairs = [
                    (f"space.{name}" if field in (where, "network") else field, f"{shown(value)}: {text}")
                    for field, text in error.errors
                ]
                raise RequestError.of(pairs) from None


def _check_run_config(config: dict, *, network: str, reference, request, owner, nodes, dataset: Dataset) -> None:
    """A trial's config by the run creation's rules, its weights (`reference`, config.pretrained)
    by their rule of who may use what for which network, without copying any file: a search whose
    weights no trial may use is refused here, not by every trial at its start."""
    weights = reference not in (None, "")
    validate_trainer_config(
        config, network=network, request=request, owner=owner, nodes=nodes, with_weights=weights, dataset=dataset
    )
    if weights:
        check_pretrained(reference, owner=owner, network=network)


def check_runs(*, owner, dataset: Dataset, network: str, config, space: dict, gpus, executor, nodes):
    """The base request as a run, then each value of the space as a run: (executor, nodes)."""
    if dataset.status in (Dataset.Status.FAILED, Dataset.Status.CANCELLED):
        raise RequestError("dataset", f"{dataset.name!r} is {dataset.status}; build it again or choose another")
    request, executor, nodes = run_services.resolve_placement(gpus=gpus, executor=executor, nodes=nodes or 1)
    if not isinstance(config, dict):
        raise RequestError("config", "expected an object")
    base = {key: value for key, value in config.items() if key != "pretrained"}
    _check_run_config(base, network=network, reference=config.get("pretrained"), request=request, owner=owner,
                      nodes=nodes, dataset=dataset)  # fmt: skip
    check_candidates(
        space=space, network=network, config=config, dataset=dataset, request=request, owner=owner, nodes=nodes
    )
    return executor, nodes
