"""Optuna's own figures of a search's study (Plotly figures), as JSON for the search page to draw
with the vendored Plotly: optimisation history, intermediate values, parallel coordinates,
parameter importance, slice. A figure Optuna cannot draw yet (too few trials) says why instead."""

from __future__ import annotations

import json
import logging

import optuna

from workbench.searches import studies
from workbench.searches.models import Search

log = logging.getLogger(__name__)

FIGURES = {
    "history": ("Optimisation history", optuna.visualization.plot_optimization_history),
    "intermediate": ("Intermediate values per trial", optuna.visualization.plot_intermediate_values),
    "parallel": ("Parallel coordinates", optuna.visualization.plot_parallel_coordinate),
    # fANOVA with few trees: a fraction of a second per page, where the default took seconds.
    "importance": (
        "Parameter importance",
        lambda study: optuna.visualization.plot_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(n_trees=16, seed=0)
        ),
    ),
    "slice": ("Slice", optuna.visualization.plot_slice),
}


def search_figures(search: Search) -> dict[str, dict]:
    """{key: {"title", "figure": Plotly JSON or None, "note": why not}}."""
    study = optuna.load_study(study_name=search.study_name, storage=studies.storage())
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    figures = {}
    for key, (title, draw) in FIGURES.items():
        if key == "importance" and len(complete) < 2:
            figures[key] = {"title": title, "figure": None, "note": "needs two complete trials"}
            continue
        try:
            figure = json.loads(draw(study).to_json())
        except (ValueError, RuntimeError) as error:
            # Optuna refuses some figures for some studies (one parameter, no values yet): say so.
            figures[key] = {"title": title, "figure": None, "note": str(error)}
            continue
        # The page heads each figure with its title: Optuna's own above the plot said it twice.
        figure.get("layout", {}).pop("title", None)
        figures[key] = {"title": title, "figure": figure, "note": ""}
    return figures
