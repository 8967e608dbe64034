"""The Optuna side of a search, in one module: the study's storage, its sampler and pruner, the
space as Optuna's distributions, and a prune's reason in words.

The storage is Optuna's own RDBStorage on the workbench's database (the Django connection's
URL): every process (web, each worker) reaches the same study, and a restart of all of them
finds it as it was (docs/design.md says why this and not a storage of our own).
"""

from __future__ import annotations

import threading

import optuna
from django.db import connection
from sqlalchemy.engine import URL

from workbench.searches.models import Search

# Optuna's own INFO lines ("Trial 3 finished...") would land in every worker's log per trial.
optuna.logging.set_verbosity(optuna.logging.WARNING)

_storages: dict[str, optuna.storages.RDBStorage] = {}
_storages_lock = threading.Lock()


def storage_url() -> str:
    """The Django database as an SQLAlchemy URL (SQLite file or PostgreSQL through psycopg 3)."""
    database = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{database['NAME']}"
    if connection.vendor == "postgresql":
        return URL.create(
            "postgresql+psycopg",
            username=database.get("USER") or None,
            password=database.get("PASSWORD") or None,
            host=database.get("HOST") or None,
            port=int(database["PORT"]) if database.get("PORT") else None,
            database=database["NAME"],
        ).render_as_string(hide_password=False)
    raise RuntimeError(f"searches need SQLite or PostgreSQL, not {connection.vendor}")


def storage() -> optuna.storages.RDBStorage:
    """One storage (one SQLAlchemy engine and pool) per database per process: building one reads
    the schema version, too slow for every pass."""
    url = storage_url()
    with _storages_lock:
        if url not in _storages:
            # SQLite: wait for the other processes' writes as Django does (settings: timeout 30).
            engine = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {"pool_pre_ping": True}
            _storages[url] = optuna.storages.RDBStorage(url, engine_kwargs=engine)
        return _storages[url]


def distributions(space: dict) -> dict[str, optuna.distributions.BaseDistribution]:
    """The space as validated (validators.validate_space) -> Optuna's distributions."""
    made = {}
    for name, spec in space.items():
        kind = spec["type"]
        if kind == "choice":
            made[name] = optuna.distributions.CategoricalDistribution(spec["values"])
        elif kind == "int":
            made[name] = optuna.distributions.IntDistribution(
                int(spec["low"]), int(spec["high"]), log=spec.get("log", False)
            )
        else:
            made[name] = optuna.distributions.FloatDistribution(spec["low"], spec["high"], log=kind == "loguniform")
    return made


def sampler_for(search: Search) -> optuna.samplers.BaseSampler:
    # A study is loaded anew by each pass: a fixed seed would draw the same values every time, so
    # the seed moves on with the trials claimed (still reproducible for a given seed).
    seed = None if search.seed is None else search.seed + search.trials_claimed
    if search.sampler == Search.Sampler.RANDOM:
        return optuna.samplers.RandomSampler(seed=seed)
    if search.sampler == Search.Sampler.GRID:
        grid = {name: spec["values"] for name, spec in search.space.items()}
        return optuna.samplers.GridSampler(grid, seed=seed)
    if search.sampler == Search.Sampler.CMAES:
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    # Trials run in parallel: the running ones count as if they had their mean value (constant liar),
    # so two trials asked at once are not given the same point.
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def pruner_for(search: Search) -> optuna.pruners.BasePruner:
    """Rungs are epochs (trials report once per epoch at step = the epoch)."""
    if search.pruner == Search.Pruner.ASHA:
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if search.pruner == Search.Pruner.HYPERBAND:
        epochs = max(int(round(float(search.base_request.get("config", {}).get("epochs") or 1))), 1)
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=epochs, reduction_factor=3)
    if search.pruner == Search.Pruner.MEDIAN:
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    return optuna.pruners.NopPruner()


def study_create(search: Search) -> optuna.Study:
    return optuna.create_study(
        study_name=search.study_name, storage=storage(), direction=search.direction, load_if_exists=True
    )


def study_for(search: Search) -> optuna.Study:
    return optuna.load_study(
        study_name=search.study_name, storage=storage(), sampler=sampler_for(search), pruner=pruner_for(search)
    )


OBJECTIVE_WORDS = {Search.Objective.VAL_LOSS: "val loss", Search.Objective.TOP1: "top-1"}


def prune_words(
    search: Search, study: optuna.Study, *, number: int, value: float, step: int, raw_of_averaged: bool = False
) -> str:
    """Why a trial was pruned, as close as the pruners let one say: its value at the rung against
    the other trials' values at the same epoch ("val loss 0.91 at epoch 2 is worse than 2 of the 3
    trials at that rung"); `raw_of_averaged`: the trial keeps a weights' average, whose value it
    shows, and was judged by its raw weights' ("raw val loss ...", pruning.trial_report)."""
    others = [
        trial.intermediate_values[step]
        for trial in study.get_trials(deepcopy=False)
        if trial.number != number and step in trial.intermediate_values
    ]
    maximize = search.direction == Search.Direction.MAXIMIZE
    better = sum(1 for other in others if (other > value if maximize else other < value))
    label = ("raw " if raw_of_averaged else "") + OBJECTIVE_WORDS.get(search.objective, search.objective)
    pruner = Search.Pruner(search.pruner).label if search.pruner != Search.Pruner.ASHA else "ASHA"
    trials = f"{len(others)} trial{'s' if len(others) != 1 else ''}"
    return f"{label} {value:.3g} at epoch {step} is worse than {better} of the {trials} at that rung ({pruner})"


def trial_id(study: optuna.Study, number: int) -> int:
    """The storage's id of the study's trial `number` (what a later report names it by)."""
    rdb = storage()
    return rdb.get_trial_id_from_study_id_trial_number(rdb.get_study_id_from_name(study.study_name), number)


def running_trials(search: Search) -> list[optuna.trial.FrozenTrial]:
    """The study's trials Optuna holds as running, read from the storage alone (no sampler or
    pruner built: every pass of every running search reads them)."""
    rdb = storage()
    study_id = rdb.get_study_id_from_name(search.study_name)
    return rdb.get_all_trials(study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
