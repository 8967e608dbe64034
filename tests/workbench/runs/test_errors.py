"""Refusals cross layers as (field, message) pairs: from the trainer's ConfigError through the one
validator module to a form, a DRF 400 body and a management command, with nothing parsed back."""

import pickle

import pytest
from django import forms

from trainer.config import ConfigError, config_from_dict
from workbench.runs.devices import DeviceRequest
from workbench.runs.validators import (
    RequestError,
    add_form_errors,
    command_error,
    drf_error,
    validate_trainer_config,
)

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


class Form(forms.Form):
    base_lr = forms.FloatField(required=False)
    device_mode = forms.CharField(required=False)


def test_it_turns_each_pair_into_a_form_error_a_400_body_and_a_command_error():
    error = RequestError(
        "config.solver.base_lr", "-1 must be a positive number", ("gpus", "'x' is not one of"), (None, "try again")
    )
    form = Form(data={})
    form.is_valid()
    add_form_errors(form, error, field_of={"solver.base_lr": "base_lr", "gpus": "device_mode"})
    assert form.errors == {
        "base_lr": ["-1 must be a positive number"],
        "device_mode": ["'x' is not one of"],
        "__all__": ["try again"],
    }
    assert drf_error(error).detail == {
        "config": ["solver.base_lr: -1 must be a positive number"],
        "gpus": ["'x' is not one of"],
        "detail": ["try again"],
    }
    assert (
        str(command_error(error))
        == "config: solver.base_lr: -1 must be a positive number; gpus: 'x' is not one of; try again"
    )
