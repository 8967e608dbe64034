"""The three ways out of a RequestError live in workbench/core/adapters.py: a form's errors, a DRF
body and a command's error, the same words each way. No other module defines or re-exports them,
so a new app cannot grow a fourth wording."""

import ast

from django import forms
from rest_framework.exceptions import PermissionDenied

from tests.conftest import REPO_ROOT
from workbench.core.adapters import add_form_errors, command_error, drf_error
from workbench.core.errors import NotAllowed, RequestError

ADAPTERS = {"add_form_errors", "drf_error", "command_error"}
HOME = "workbench.core.adapters"


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


def test_it_answers_a_field_the_requester_may_not_set_with_a_403():
    refused = drf_error(NotAllowed("priority", "only staff can set a priority"))
    assert isinstance(refused, PermissionDenied) and refused.detail == "only staff can set a priority"


def _imported_names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module, {alias.name for alias in node.names}


def test_it_keeps_the_adapters_in_core_alone():
    # They had lived in workbench/runs/validators.py, and 12 apps' modules reached into the runs app
    # for them; a copy or a re-export elsewhere would let the wordings drift apart again.
    strays = []
    for package in ("workbench", "datasets"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            where = path.relative_to(REPO_ROOT).as_posix()
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
            if where != "workbench/core/adapters.py":
                strays += [f"{where} defines {name}" for name in sorted(defined & ADAPTERS)]
            for module, names in _imported_names(tree):
                if module != HOME and names & ADAPTERS:
                    strays.append(f"{where} imports {sorted(names & ADAPTERS)} from {module}")
    assert strays == []
