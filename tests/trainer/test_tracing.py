"""The network graph's trace and other threads' forward passes in one process (the web process
serves both at once): torch.fx patches torch.nn.Module for the whole process while it traces."""

from __future__ import annotations

import threading

from trainer.netgraph import network_graph
from trainer.networks import InputSpec, check_input_size, network_cost


def test_it_keeps_forward_passes_in_other_threads_out_of_a_trace():
    spec = InputSpec(3, 32, 32, 10)
    errors: list[BaseException] = []
    tracing = threading.Event()

    def trace() -> None:
        try:
            for _ in range(10):
                tracing.set()
                network_graph("resnet18", spec)
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
        finally:
            tracing.clear()

    tracer = threading.Thread(target=trace)
    tracer.start()
    tracing.wait(timeout=30)
    costs = 0
    while tracer.is_alive():
        # With torch.fx's own tracer: "module is not installed as a submodule" from its hooks.
        params, _ = network_cost("lenet", InputSpec(1, 28, 28, 10))
        check_input_size("resnet18", InputSpec(3, 32, 32, 10))
        assert params > 0
        costs += 1
    tracer.join()
    assert not errors, errors
    assert costs > 0
