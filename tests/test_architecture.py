"""The structure rules of docs/architecture.md, kept true by the suite.

The import direction itself is import-linter's (pyproject.toml, run by `make lint`); these tests
check what a contract cannot: that the contract lists every module of the project shell, and
the size and import rules a newcomer relies on to find things.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGES = ("workbench", "datasets", "trainer")
# Validators read as one flat list of checks; splitting them would hide the rules, not clarify them.
FLAT_VALIDATORS = {("trainer/config.py", "validate")}


def _sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def _contracts() -> list[dict]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _listed(layers: list[str]) -> set[str]:
    return {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}


def _children(package: str) -> set[str]:
    """The modules and subpackages right inside `package`, as a layers contract names them."""
    folder = REPO_ROOT / package.replace(".", "/")
    return {
        path.stem if path.is_file() else path.name
        for path in folder.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or ((path / "__init__.py").is_file() and path.name != "migrations")
    }


def _module_name(path: Path) -> str:
    return _relative(path).removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def test_it_lists_every_module_of_the_project_shell_in_the_layers_contract():
    layers = next(c for c in _contracts() if c["type"] == "layers" and not c.get("containers"))["layers"]
    shell = {f"workbench.{name}" for name in _children("workbench")}
    assert sorted(shell - _listed(layers)) == []


def test_it_lists_every_module_of_an_app_in_the_apps_layers_contract():
    # A module a layers contract does not name is free to import anything: a new one must take
    # its place in the order before it is merged.
    unlisted = [
        f"{container}.{name}"
        for contract in _contracts()
        if contract["type"] == "layers"
        for container in contract.get("containers", [])
        for name in sorted(_children(container) - _listed(contract["layers"]))
    ]
    assert unlisted == []


# Apps whose inside is not ordered by a contract yet (DESIGN: a new app gets its contract on its
# first day, so this list only shrinks). The inference app has a contract for its child's modules.
APPS_WITHOUT_INNER_LAYERS = {"workbench.benchmarks", "workbench.inference", "workbench.weights", "workbench.workers"}


def test_it_orders_the_inside_of_every_app_by_a_contract():
    apps = {_module_name(path.parent) for package in PACKAGES for path in (REPO_ROOT / package).rglob("apps.py")}
    apps.discard("workbench")  # the project's own package: its modules are the top layer of the one-way layers
    ordered = {container for contract in _contracts() for container in contract.get("containers", [])}
    assert sorted(apps - ordered) == sorted(APPS_WITHOUT_INNER_LAYERS)


# What a module's docstring says when it (or the child process it is part of) must not load
# Django: the inference engine, the label readers' child, the image rules of the build workers.
WITHOUT_DJANGO = re.compile(r"[Ww]ithout Django|No Django")


def test_it_holds_every_module_that_says_it_runs_without_django_to_a_contract():
    # A claim in prose stops being true silently; a forbidden contract that names the module (or
    # a package holding it) fails `lint-imports` the day someone imports Django into it.
    sources = [
        source
        for contract in _contracts()
        if contract["type"] == "forbidden" and "django" in contract["forbidden_modules"]
        for source in contract["source_modules"]
    ]
    unheld = []
    for path in _sources():
        module = _module_name(path)
        claim = WITHOUT_DJANGO.search(ast.get_docstring(ast.parse(path.read_text())) or "")
        if claim and not any(module == source or module.startswith(f"{source}.") for source in sources):
            unheld.append(f"{module}: {claim.group(0)!r}")
    assert unheld == []


def test_it_keeps_modules_and_functions_short():
    too_long = []
    for path in _sources():
        source = path.read_text()
        if source.count("\n") > 500:
            too_long.append(f"{_relative(path)}: {source.count(chr(10))} lines")
        is_view_module = path.stem.endswith(("views", "api"))
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = node.end_lineno - node.lineno + 1
            limit = 40 if is_view_module and not node.name.startswith("_") else 60
            if length > limit and (_relative(path), node.name) not in FLAT_VALIDATORS:
                too_long.append(f"{_relative(path)}:{node.lineno} {node.name}: {length} lines (limit {limit})")
    assert too_long == []


def test_it_says_why_at_every_import_inside_a_function():
    # An import inside a function is either a heavy module kept out of processes that never
    # need it, or a cycle; either way the reason is written beside it.
    silent = []
    for path in _sources():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom) and not _explained(lines, inner.lineno - 1):
                    silent.append(f"{_relative(path)}:{inner.lineno} {lines[inner.lineno - 1].strip()}")
    assert silent == []


def _explained(lines: list[str], index: int) -> bool:
    """A comment on the import's own line: one above a group could be about anything (two
    such reasons had stopped being true when this rule was tightened)."""
    return "#" in lines[index]


def test_it_starts_django_and_its_urls_without_importing_torch(tmp_path):
    # Every manage.py command, daphne and the CLI beside `make run` load the URLs; torch (and
    # torchvision) took 4 to 12 s of that on this machine, and only a worker that trains, checks
    # weights or runs a model needs it. A view module that imports them at the top puts it back.
    import os  # a child process: this one imported torch long ago
    import subprocess
    import sys

    probe = (
        "import sys, django; django.setup(); from django.urls import get_resolver; "
        "get_resolver().url_patterns; from django.core import management; "
        "management.get_commands(); "
        "heavy = sorted(name for name in ('torch', 'torchvision', 'timm') if name in sys.modules); "
        "print(','.join(heavy))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "workbench.settings", "WORKBENCH_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "", f"imported at start: {result.stdout.strip()}"


# Files the trainer wrote itself and reads back whole (not weights a user or a cache supplied):
# a run's checkpoints on resume, and the bundles its exports write.
OWN_FILE_READERS = {"trainer/checkpoint.py", "trainer/inference.py"}
WEIGHTS_READER = "trainer/weights_file.py"


def test_it_reads_weights_files_in_one_module():
    # Three readers once took and refused different files (a .safetensors upload refused while
    # `weights import` took it; the inflate check on uploads only). Weights a user, the store or a
    # cache supplies are read by trainer/weights_file.py alone.
    readers = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            if (owner, name) == ("torch", "load") or name in ("load_file", "safe_open", "load_safetensors"):
                readers.append(_relative(path))
    assert sorted(set(readers) - OWN_FILE_READERS) == [WEIGHTS_READER]
