"""Refusals cross layers as (field, message) pairs: from the trainer's ConfigError through the one
validator module into a RequestError, with nothing parsed back (its ways out to a form, a DRF body
and a command: tests/workbench/core/test_adapters.py)."""

import pickle

import pytest

from trainer.config import ConfigError, config_from_dict
from workbench.core.errors import RequestError
from workbench.runs.devices import DeviceRequest
from workbench.runs.validators import validate_trainer_config

CPU = DeviceRequest.cpu()


def test_it_names_the_trainer_field_of_a_config_error():
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"network": "lenet", "run_dir": "r", "solver": {"base_lr": -1}}, check_paths=False)
    assert caught.value.field == "solver.base_lr" and caught.value.message == "-1 must be a positive number up to 10"
    assert str(caught.value) == "solver.base_lr: -1 must be a positive number up to 10"  # the trainer's own CLI
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.field, again.message) == ("solver.base_lr", "-1 must be a positive number up to 10")


def test_it_carries_the_field_over_to_a_request_error():
    with pytest.raises(RequestError) as caught:
        validate_trainer_config({"solver": {"lr_policy": "zigzag"}}, network="lenet", request=CPU)
    assert caught.value.field == "config.solver.lr_policy"
    assert caught.value.message.startswith("'zigzag' is not one of fixed, step")
