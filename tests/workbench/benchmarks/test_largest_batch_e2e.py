"""The new-run page in Chromium: "Find the largest batch" queues the finder on the chosen GPU of
a real worker (one simulated GPU of 64 MiB, whose capacity the trainer enforces), says what it
waits for, and offers the answer for the batch-size field ("Use 412")."""

from __future__ import annotations

import pytest

from tests.conftest import log_in, start_worker
from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.selectors import largest_batch_answer

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def small_gpu_worker():
    worker = start_worker("finder-worker", WORKBENCH_SIMULATED_GPUS="1", WORKBENCH_SIMULATED_GPU_MEMORY_MB="64")
    yield worker
    worker.stop()


def test_it_offers_the_largest_batch_found_on_the_runs_gpu_for_the_batch_size(
    live_server_url, page, owner, small_gpu_worker
):
    dataset = make_dataset_row(
        owner,
        name="mnist-like",
        image_width=28,
        image_height=28,
        channels=1,
        labels=[str(i) for i in range(10)],
        splits={"train": {"count": 2000}, "val": {"count": 200}},
    )
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/new/?dataset={dataset.pk}")
    page.check("input[name=device_mode][value=count]")
    assert page.input_value("#id_batch_size") == "64"

    page.click("#find-batch")
    # The wait: the button is off and the status says what the job is doing.
    assert page.locator("#find-batch").is_disabled()
    page.wait_for_function(
        "['Queued', 'Measuring'].some((w) => document.getElementById('find-batch-status').textContent.startsWith(w))"
    )
    page.wait_for_selector("#find-batch-status[data-state=found]", timeout=180_000)

    benchmark = Benchmark.objects.get()
    answer = largest_batch_answer(benchmark)
    assert benchmark.state == Benchmark.State.DONE, benchmark.reason
    assert benchmark.device_labels == [f"{small_gpu_worker.nodename}: GPU 0 (simulated)"]
    # LeNet on 28x28 under 64 MiB: a few hundred images, well under the 2000 of the training set.
    assert 64 < answer["batch_size"] < 2000
    assert f"Largest batch that fits: {answer['batch_size']}" in page.text_content("#find-batch-status")
    assert not page.locator("#find-batch").is_disabled()
    # Offered, not written over the field: "Use 412" puts it there.
    assert page.input_value("#id_batch_size") == "64"
    page.click(f"#use-batch:text('Use {answer['batch_size']}')")
    assert page.input_value("#id_batch_size") == str(answer["batch_size"])
    assert page.locator("#use-batch").count() == 0
