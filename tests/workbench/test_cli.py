"""The door of every manage.py command: a database that is not migrated is said in one line."""

from tests.workbench.test_settings import manage


def test_it_says_in_one_line_that_the_database_is_not_migrated_and_what_to_run(tmp_path):
    data_dir = tmp_path / "var"
    data_dir.mkdir()  # a data dir, as a past `runworkbench --help` left it: no database in it

    for words in (["weights", "list"], ["train", "--dataset", "1", "--network", "lenet", "--gpus", "cpu"]):
        result = manage(*words, data_dir=data_dir)

        assert result.returncode == 1, result.stderr
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"the database {data_dir / 'db.sqlite3'} is not set up for this workbench (")
        assert "run `manage.py migrate` with the same WORKBENCH_DATA_DIR" in line and "Traceback" not in line

    assert manage("migrate", "-v0", data_dir=data_dir).returncode == 0
    listed = manage("weights", "list", data_dir=data_dir)
    assert listed.returncode == 0 and listed.stdout.startswith("no weights filed")
