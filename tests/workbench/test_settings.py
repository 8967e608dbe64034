"""The settings module under different environments, each in a fresh interpreter."""

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT


def manage(*args: str, data_dir, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"REDIS_URL", "DATABASE_URL", "SECRET_KEY", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    clean.update(DJANGO_SETTINGS_MODULE="workbench.settings", WORKBENCH_DATA_DIR=str(data_dir), **env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def test_it_passes_the_deployment_checks_in_production_mode(tmp_path):
    result = manage("check", "--deploy", "--fail-level", "WARNING", data_dir=tmp_path, WORKBENCH_PRODUCTION="1")
    assert result.returncode == 0, result.stdout + result.stderr


def test_it_fails_deployment_checks_without_production_mode(tmp_path):
    # The check above is meaningful only if the plain defaults do trip it.
    result = manage("check", "--deploy", "--fail-level", "WARNING", data_dir=tmp_path)
    assert result.returncode != 0
    assert "SECURE_SSL_REDIRECT" in result.stderr + result.stdout


def test_it_refuses_debug_in_production(tmp_path):
    result = manage("check", data_dir=tmp_path, WORKBENCH_PRODUCTION="1", DEBUG="1")
    assert result.returncode != 0
    assert "DEBUG must be off when WORKBENCH_PRODUCTION is on" in result.stderr


def test_it_refuses_a_short_secret_key(tmp_path):
    result = manage("check", data_dir=tmp_path, SECRET_KEY="short")
    assert "SECRET_KEY must be at least 50 characters long" in result.stderr


def test_it_names_a_bad_environment_value(tmp_path):
    result = manage("check", data_dir=tmp_path, DEBUG="perhaps")
    assert result.returncode != 0
    assert "DEBUG='perhaps' is not a boolean" in result.stderr


def test_it_defaults_to_sqlite_in_wal_mode_in_the_data_dir(tmp_path):
    script = (
        "from django.db import connection; c = connection.cursor(); c.execute('PRAGMA journal_mode');"
        "print(connection.vendor, c.fetchone()[0], connection.settings_dict['NAME'])"
    )
    result = manage("shell", "--verbosity", "0", "-c", script, data_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sqlite", "wal", str(tmp_path / "db.sqlite3")]
    assert (tmp_path / "secret_key").exists()


def test_it_reads_every_variable_in_the_settings_module_and_lists_it_in_the_readme():
    # One settings module reads the environment; the README's table is the operator's reference.
    import re

    settings_source = (REPO_ROOT / "workbench" / "settings.py").read_text()
    read_in_settings = set(re.findall(r'env_\w+\(\s*"([A-Z_]+)"', settings_source))
    assert {"WORKBENCH_DATA_DIR", "WORKBENCH_ARCHIVE_MAX_BYTES", "DATABASE_URL"} <= read_in_settings
    readme = (REPO_ROOT / "README.md").read_text()
    assert sorted(name for name in read_in_settings if f"`{name}`" not in readme) == []

    readers = re.compile(r"os\.environ(?:\.get)?[\[(]\s*\"(WORKBENCH_[A-Z_]+)\"|env_\w+\(\s*\"([A-Z_]+)\"")
    elsewhere = {}
    for package in ("workbench", "datasets", "trainer"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            if path.name in {"settings.py", "env.py"} or "migrations" in path.parts:
                continue
            if found := readers.findall(path.read_text()):
                elsewhere[str(path.relative_to(REPO_ROOT))] = found
    assert elsewhere == {}


def test_it_says_in_one_line_that_a_command_finds_no_data_dir_and_creates_none(tmp_path):
    # A second terminal without WORKBENCH_DATA_DIR: no traceback, no empty data dir left behind.
    missing = tmp_path / "var"
    result = manage("train", "--dataset", "1", "--network", "lenet", "--wait", data_dir=missing)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"no workbench data in {missing}: set WORKBENCH_DATA_DIR to the data dir of the running workbench (as "
        "in the terminal where it runs), or start one there with `make run` (manage.py runworkbench)"
    ]
    assert not missing.exists()


def test_it_writes_nothing_for_help_and_needs_no_data_dir(tmp_path):
    # `runworkbench --help` once made the data dir with a secret key; the next command there met
    # an empty database and printed a 40-line traceback.
    missing = tmp_path / "var"
    for words in (["runworkbench", "--help"], ["train", "-h"], ["help", "runworkbench"], []):
        result = manage(*words, data_dir=missing)
        assert result.returncode == 0 and ("usage: manage.py" in result.stdout or "subcommand" in result.stdout), words
        assert not missing.exists(), words
    empty = tmp_path / "empty"
    empty.mkdir()
    assert manage("runworkbench", "--help", data_dir=empty).returncode == 0
    assert list(empty.iterdir()) == []  # no secret key, no uploads folder

    after = manage("train", "--dataset", "1", "--network", "lenet", data_dir=missing)
    assert after.returncode == 1 and after.stderr.startswith(f"no workbench data in {missing}:")
