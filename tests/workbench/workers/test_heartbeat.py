"""The heartbeat says only that its worker lives; the housekeeping passes run beside it, one at a time."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from tests.support.waiting import wait_until
from workbench.workers import heartbeat
from workbench.workers.models import WorkerHost
from workbench.workers.signals import housekeeping


@pytest.fixture
def beating_threads():
    """Starts heartbeat and housekeeping threads in this process, and stops them at the end."""
    threads = []

    def start(target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    heartbeat._stop.set()
    for thread in threads:
        thread.join(timeout=30)
    heartbeat._stop.clear()


def test_it_keeps_beating_while_a_housekeeping_pass_is_slow(transactional_db, beating_threads):
    # On a loaded host a pass took 26.7 s; the beat ran the passes itself, went silent past the
    # worker timeout, and the host's own healthy runs were reclaimed. Passes are held here until
    # the beat has been seen to go on without them, and the two "workers" never pass at once.
    release = threading.Event()
    inside: list[str] = []
    most_at_once = []
    entered = []

    def slow_pass(sender, hostname: str, **kwargs) -> None:
        inside.append(hostname)
        most_at_once.append(len(inside))
        entered.append(timezone.now())
        release.wait(timeout=60)
        inside.remove(hostname)

    housekeeping.connect(slow_pass, weak=False, dispatch_uid="tests.slow_pass")
    try:
        beating_threads(heartbeat._beat_forever, "slow@tests", None)
        beating_threads(heartbeat._keep_house_forever, "slow@tests")
        beating_threads(heartbeat._keep_house_forever, "other@tests")
        wait_until(lambda: entered, what="a housekeeping pass to begin", timeout=60)

        def beat_after_the_pass_began() -> bool:
            host = WorkerHost.objects.filter(hostname="slow@tests").first()
            return host is not None and (host.last_seen - entered[0]).total_seconds() > 1.0

        wait_until(beat_after_the_pass_began, what="a heartbeat while the pass is held", timeout=60)
        assert WorkerHost.objects.get(hostname="slow@tests").is_online
        assert len(inside) == 1, "a second pass began while the first was held"
    finally:
        release.set()
        housekeeping.disconnect(dispatch_uid="tests.slow_pass")
    assert max(most_at_once) == 1
