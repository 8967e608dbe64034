"""Short field names (lr -> solver.base_lr, solver -> solver.optimizer, ...) have one table,
trainer.config.SHORT_FIELDS: the API, `manage.py train`, sweeps, searches and the new-run form
each put a short name where the table says (five copies of it had drifted: the optimizer was
`solver` in one door and `optimizer` in another)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from trainer.config import SHORT_ALIASES, SHORT_FIELDS, short_path, with_setting
from workbench.runs.management.commands.train import SHORT_OPTIONS, Command
from workbench.runs.validators import SWEEP_FIELDS, sweep_config
from workbench.runs.web.forms import CONFIG_PATH, SWEPT_PATH, RunForm
from workbench.runs.web.serializers import SHORT_NAMES, RunCreateSerializer
from workbench.searches.validators import trial_request

VALUES = {
    "lr": 0.02,
    "solver": "adam",
    "momentum": 0.8,
    "weight_decay": 0.001,
    "lr_policy": "cosine",
    "epochs": 3.0,
    "batch_size": 16,
    "preset": "deit",
}


def _expected(name: str) -> dict:
    return with_setting({}, short_path(name), VALUES[SHORT_ALIASES.get(name, name)])


def test_it_has_a_value_to_send_for_every_short_name():
    assert set(VALUES) == set(SHORT_FIELDS) and set(SHORT_ALIASES.values()) <= set(SHORT_FIELDS)


@pytest.mark.parametrize("name", SHORT_NAMES)
def test_it_puts_each_short_name_of_the_api_where_the_table_says(name):
    serializer = RunCreateSerializer(data={"dataset": 1, "network": "lenet", name: VALUES[name]})
    assert serializer.is_valid(), serializer.errors
    assert serializer.trainer_config() == _expected(name)


@pytest.mark.parametrize("name", SHORT_OPTIONS)
def test_it_puts_each_short_option_of_the_command_where_the_table_says(name):
    parser = Command().create_parser("manage.py", "train")
    argv = ["--dataset", "1", "--network", "lenet", f"--{name.replace('_', '-')}", str(VALUES[name])]
    assert Command()._config(vars(parser.parse_args(argv))) == _expected(name)


@pytest.mark.parametrize("name", SWEEP_FIELDS)
def test_it_puts_each_swept_name_where_the_table_says(name):
    assert sweep_config({}, {name: VALUES[name]}) == _expected(name)


@pytest.mark.parametrize("name", [*SHORT_FIELDS, *SHORT_ALIASES])
def test_it_puts_each_searched_short_name_and_alias_where_the_table_says(name):
    network, config = trial_request(network="lenet", config={}, params={name: VALUES[SHORT_ALIASES.get(name, name)]})
    assert (network, config) == ("lenet", _expected(name))


@pytest.mark.parametrize("name", [name for name in CONFIG_PATH if short_path(name)])
def test_it_puts_each_short_named_form_field_where_the_table_says(name):
    form = RunForm.__new__(RunForm)  # base_config reads only the cleaned fields
    form.cleaned_data = {name: VALUES[SHORT_ALIASES.get(name, name)]}
    assert form.base_config() == _expected(name)


def test_it_sweeps_the_forms_learning_rate_and_batch_as_the_short_names_lr_and_batch_size():
    assert SWEPT_PATH == {"base_lr": SHORT_FIELDS["lr"], "batch_size": SHORT_FIELDS["batch_size"]}


# A short name mapped to a path in a source of its own: {"lr": ("solver", "base_lr")} or
# {"solver": "solver.optimizer"}, the shape the five copies had.
_COPY = re.compile(r"""["'](?:lr|solver|optimizer)["']\s*:\s*\(?\s*["']solver\b""")


def test_it_keeps_no_second_table_of_short_names():
    sources = [p for package in ("workbench", "datasets") for p in (REPO_ROOT / package).rglob("*.py")]
    copies = [str(Path(p).relative_to(REPO_ROOT)) for p in sources if _COPY.search(p.read_text())]
    assert copies == []
