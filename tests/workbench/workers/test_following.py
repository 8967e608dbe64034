"""The one loop that follows a child to its end (workers/following.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from workbench.workers.following import follow_child
from workbench.workers.processes import EventTail, GracefulStop, start_child

REPO = Path(__file__).resolve().parents[3]


def _child(code: str, tmp_path: Path):
    with (tmp_path / "child.log").open("ab") as output:
        return start_child([sys.executable, "-c", code], stdout=output, own_session=True)


def test_it_stores_what_the_child_wrote_last_and_returns_its_code(tmp_path):
    # The child writes and exits at once: the loop's last store still reads what it wrote.
    events = tmp_path / "events.jsonl"
    process = _child(f'open({str(events)!r}, \'a\').write(\'{{"type": "log", "line": "bye"}}\\n\'); exit(3)', tmp_path)
    tail, stored, looks = EventTail(events), [], []
    stop = GracefulStop.of_process(process, grace_seconds=5, name="child")
    code = follow_child(process, stop=stop, store=lambda: stored.extend(tail.read()), look=lambda: looks.append(1))
    assert code == 3
    assert [event["line"] for event in stored] == ["bye"]


def test_it_passes_a_stop_on_with_grace(tmp_path):
    process = _child("import time; time.sleep(600)", tmp_path)
    stop = GracefulStop.of_process(process, grace_seconds=5, name="child")
    assert follow_child(process, stop=stop, store=lambda: None, look=stop.request, look_every=0.1) == -15


def test_it_takes_the_child_with_it_when_following_fails(tmp_path):
    process = _child("import time; time.sleep(600)", tmp_path)
    stop = GracefulStop.of_process(process, grace_seconds=5, name="child")

    def look() -> None:
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError):
        follow_child(process, stop=stop, store=lambda: None, look=look)
    assert process.poll() is not None, "a child nobody follows was left running"


def test_it_is_the_only_loop_that_follows_a_child():
    # Every module that stops a child of its own with grace follows it through the one loop.
    stoppers = [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "workbench").rglob("*.py")
        if "GracefulStop.of_process(" in path.read_text()
    ]
    assert stoppers, "no follower found: the scan looks in the wrong place"
    copies = [path for path in stoppers if "follow_child(" not in (REPO / path).read_text()]
    assert not copies, f"these follow a child with a loop of their own: {copies}"
