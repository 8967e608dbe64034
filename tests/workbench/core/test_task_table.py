"""The per-task table (workbench/core/task_table.py): each row drives its task's pages, and no
new branch on a task's name appears outside the homes of the rule (issue 32)."""

from __future__ import annotations

import ast
import re
from collections import Counter

from django.template.loader import get_template
from django.urls import reverse

from tests.conftest import REPO_ROOT
from trainer.protocol import TASKS
from workbench.core.task_table import TASK_TABLE, row_of_action, task_row
from workbench.inference.views import JOB_PAGES

NAMES = {"CLASSIFICATION", "DETECTION", "SEGMENTATION"}
# The homes of the rule: the trainer's tasks and their names, the label readers, the table.
HOMES = ("trainer/tasks/", "trainer/protocol.py", "datasets/labels/", "workbench/core/task_table.py")
# Branches left when the table came (issue 32's report lists what each decides); a file's count may
# only fall. What this scan catches: a comparison (==, !=, in) or a dict key with a task's name or
# constant in Python; `task ==` / `task ===` with a quoted name in templates and scripts. It does not
# catch an isinstance on a predictor class or a name reached through a variable.
LEFT = {
    # dataset.json leaves out "task" for a classifier, as every dataset folder before tasks did.
    "datasets/build.py": 1,
}
QUOTED = r"""["'](?:classification|detection|segmentation)["']"""
TEXT_BRANCH = re.compile(rf"task\s*(?:===?|!==?)\s*{QUOTED}|{QUOTED}\s*(?:===?|!==?)\s*[\w.]*task")


def _is_task_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in NAMES
    return isinstance(node, ast.Constant) and node.value in TASKS


def _python_branches(source: str) -> int:
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(map(_is_task_name, [node.left, *node.comparators])):
            count += 1
        elif isinstance(node, ast.Dict) and any(key is not None and _is_task_name(key) for key in node.keys):
            count += 1
    return count


def _branches() -> Counter:
    found: Counter = Counter()
    for root, pattern in (("workbench", "*.py"), ("datasets", "*.py"), ("trainer", "*.py"),
                          ("templates", "*.html"), ("static", "*.js")):  # fmt: skip
        for path in sorted((REPO_ROOT / root).rglob(pattern)):
            name = path.relative_to(REPO_ROOT).as_posix()
            if name.startswith(HOMES) or "migrations" in path.parts or "vendor" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            count = _python_branches(text) if path.suffix == ".py" else len(TEXT_BRANCH.findall(text))
            if count:
                found[name] = count
    return found


def test_it_finds_no_new_branch_on_a_task_name_outside_the_table():
    grown = {name: count for name, count in _branches().items() if count > LEFT.get(name, 0)}
    assert grown == {}, "read the task's row (workbench/core/task_table.py) or give the task the work (trainer/tasks/)"


def test_it_catches_a_branch_in_python_a_template_and_a_script():
    assert _python_branches("if run.dataset.task == CLASSIFICATION:\n    pass\n") == 1
    assert _python_branches("NAMES = {'detection': 'detected'}\n") == 1
    assert TEXT_BRANCH.search("{% if run.dataset.task == 'detection' %}")
    assert TEXT_BRANCH.search('const detection = r.task === "detection";')
    assert not TEXT_BRANCH.search("{% if task.drawn %}")


def test_it_has_one_row_per_task_each_with_its_own_action_and_page():
    assert tuple(TASK_TABLE) == TASKS
    for name in TASKS:
        row = task_row(name)
        assert row_of_action(row.action) is row
        assert reverse(row.page, args=[1]).startswith("/")
        get_template(row.template), get_template(row.job_template)
        assert JOB_PAGES[row.action] == row.page
    assert task_row(None) is task_row("classification")  # a dataset from before tasks were recorded
    assert row_of_action("test") is None


def test_it_names_the_tasks_when_asked_for_an_unknown_one():
    try:
        task_row("keypoints")
    except ValueError as error:
        assert str(error) == "task 'keypoints' is not one of classification, detection, segmentation"
    else:
        raise AssertionError("an unknown task must fail")
