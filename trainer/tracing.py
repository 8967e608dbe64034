"""torch.fx tracing that leaves the process's other threads alone.

torch.fx's tracer patches `torch.nn.Module.__call__` and `__getattr__` for the whole process
while it traces a network, not for its own thread: a forward pass that another thread runs
meanwhile goes through the tracer's hooks and fails ("module is not installed as a submodule").
The web process does both at once from its threads (the network graph traces while the network
table checks each network's size and cost, a user classifies an image, the augmentation preview
runs its transforms). So the tracer here hands every call from another thread straight to the
module, and traces take turns: two patchers restoring torch in an interleaved order would leave
one's hooks installed for good.
"""

from __future__ import annotations

import threading
from typing import Any

from torch import fx, nn

_ONE_TRACE_AT_A_TIME = threading.Lock()


class ThreadTracer(fx.Tracer):
    """An fx.Tracer whose process-wide hooks act only in the thread that traces."""

    _thread: int | None = None

    def trace(self, root: nn.Module, concrete_args: dict[str, Any] | None = None) -> fx.Graph:
        with _ONE_TRACE_AT_A_TIME:
            self._thread = threading.get_ident()
            try:
                return super().trace(root, concrete_args)
            finally:
                self._thread = None

    def _other_thread(self) -> bool:
        return threading.get_ident() != self._thread

    def call_module(self, m: nn.Module, forward: Any, args: tuple, kwargs: dict) -> Any:
        if self._other_thread():
            return forward(*args, **kwargs)  # another thread's forward pass: not part of this trace
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if self._other_thread():
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)
