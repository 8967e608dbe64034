import os
import stat

import pytest
from django.core.exceptions import ImproperlyConfigured

from workbench.env import asks_for_help, env_bool, env_int, env_list, env_path_list, read_or_create_secret


def test_it_reads_booleans(monkeypatch):
    monkeypatch.setenv("WB_FLAG", "yes")
    assert env_bool("WB_FLAG") is True
    monkeypatch.setenv("WB_FLAG", "0")
    assert env_bool("WB_FLAG", True) is False
    monkeypatch.delenv("WB_FLAG")
    assert env_bool("WB_FLAG", True) is True


def test_it_refuses_a_bad_boolean_naming_the_variable(monkeypatch):
    monkeypatch.setenv("WB_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="WB_FLAG='maybe' is not a boolean"):
        env_bool("WB_FLAG")


def test_it_refuses_a_bad_integer(monkeypatch):
    monkeypatch.setenv("WB_COUNT", "ten")
    with pytest.raises(ImproperlyConfigured, match="WB_COUNT='ten' is not an integer"):
        env_int("WB_COUNT", 1)
    monkeypatch.setenv("WB_COUNT", "-3")
    with pytest.raises(ImproperlyConfigured, match="below the minimum of 0"):
        env_int("WB_COUNT", 1, minimum=0)


def test_it_splits_lists(monkeypatch):
    monkeypatch.setenv("WB_HOSTS", " a.example, b.example ,,")
    assert env_list("WB_HOSTS", []) == ["a.example", "b.example"]


def test_it_refuses_relative_import_roots(monkeypatch, tmp_path):
    monkeypatch.setenv("WB_ROOTS", f"{tmp_path}{os.pathsep}relative/dir")
    with pytest.raises(ImproperlyConfigured, match="'relative/dir' is not an absolute path"):
        env_path_list("WB_ROOTS")


def test_it_generates_the_secret_key_once_and_keeps_it_private(tmp_path):
    path = tmp_path / "secret_key"
    first = read_or_create_secret(path)
    assert len(first) >= 50
    assert read_or_create_secret(path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]


def test_it_hears_a_request_for_help_only_on_manage_pys_command_line():
    assert asks_for_help(["/srv/workbench/manage.py"]) and asks_for_help(["manage.py", "train", "-h"])
    assert not asks_for_help(["manage.py", "train", "--", "-h"])
    # pytest's xdist workers run as `python -c` with no arguments; daphne and celery have their own.
    assert not asks_for_help(["-c"]) and not asks_for_help([])
    assert not asks_for_help(["/usr/bin/daphne", "--help"])
