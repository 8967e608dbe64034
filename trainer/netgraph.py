"""A network as its graph of layers (what DIGITS drew from the prototxt): every layer with its
output shape and parameter count, and the edges between them (branches of GoogLeNet, the skip
connections of ResNet), for any network `build_model` knows, built-in or custom.

torch.fx traces the network on the meta device (no memory, no compute) and propagates shapes for
one image; nodes that are not tensors (shape arithmetic in ViT) are left out and their inputs
passed through, so an edge always joins two layers.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from trainer.networks import InputSpec, NetworkError, build_model
from trainer.tracing import ThreadTracer
from trainer.zoo import is_timm

# One word of detail per layer type, read from the module (kernel, stride, width...).
_DETAILS = {
    nn.Conv2d: lambda m: (
        f"{m.out_channels} filters {_pair(m.kernel_size)}"
        + (f" stride {_pair(m.stride)}" if _pair(m.stride) != "1" else "")
        + (f" groups {m.groups}" if m.groups > 1 else "")
    ),
    nn.Linear: lambda m: f"{m.in_features} → {m.out_features}",
    nn.MaxPool2d: lambda m: f"{_pair(m.kernel_size)} stride {_pair(m.stride)}",
    nn.AvgPool2d: lambda m: f"{_pair(m.kernel_size)} stride {_pair(m.stride)}",
    nn.AdaptiveAvgPool2d: lambda m: f"to {_pair(m.output_size)}",
    nn.Dropout: lambda m: f"p {m.p:g}",
    nn.MultiheadAttention: lambda m: f"{m.num_heads} heads",
}


def _pair(value: Any) -> str:
    if isinstance(value, tuple | list):
        return str(value[0]) if len(set(value)) == 1 else "x".join(str(v) for v in value)
    return str(value)


def _detail(module: nn.Module) -> str:
    for kind, describe in _DETAILS.items():
        if isinstance(module, kind):
            return describe(module)
    return ""


def _op(node: fx.Node, model: nn.Module) -> tuple[str, str, int]:
    """(type, detail, parameters) of one node."""
    if node.op == "call_module":
        module = model.get_submodule(str(node.target))
        return type(module).__name__, _detail(module), sum(p.numel() for p in module.parameters(recurse=True))
    if node.op == "get_attr":
        value = getattr(model, str(node.target), None) if "." not in str(node.target) else None
        value = model.get_parameter(str(node.target)) if value is None else value
        return "Parameter", "", value.numel() if isinstance(value, nn.Parameter) else 0
    if node.op == "placeholder":
        return "Input", "", 0
    name = getattr(node.target, "__name__", str(node.target))
    return name.strip("_"), "", 0


def _shape(node: fx.Node) -> list[int] | None:
    meta = node.meta.get("tensor_meta")
    if not hasattr(meta, "shape") and isinstance(meta, tuple | list) and meta and node.op == "call_module":
        meta = meta[0]  # a layer answering a tuple (MultiheadAttention: output, weights): its output
    if meta is None or not hasattr(meta, "shape"):
        return None
    return list(meta.shape)[1:]  # without the batch dimension


def _unpacks(node: fx.Node, kept: dict[fx.Node, int]) -> bool:
    """`output[0]` of a layer kept whole (its tuple): the layer stands for it."""
    return node.target is operator.getitem and node.args[0] in kept and node.args[1] == 0


def _kept_inputs(node: fx.Node, kept: dict[fx.Node, int], through: dict[fx.Node, list[int]]) -> list[int]:
    found: list[int] = []
    for source in node.all_input_nodes:
        for index in [kept[source]] if source in kept else through.get(source, []):
            if index not in found:
                found.append(index)
    return found


def _tracer(name: str) -> fx.Tracer:
    """torch.fx's tracer; for the zoo's networks with timm's own list of what not to trace into
    (its padding helpers and attention blocks branch on sizes, which a symbolic trace cannot)."""
    if not is_timm(name):
        return ThreadTracer()
    from timm.layers import _fx as timm_fx  # timm: loaded only where this runs

    leaves = tuple(timm_fx.get_notrace_modules())

    class TimmTracer(ThreadTracer):
        def is_leaf_module(self, module: nn.Module, qualified_name: str) -> bool:
            return isinstance(module, leaves) or super().is_leaf_module(module, qualified_name)

    return TimmTracer(autowrap_functions=tuple(timm_fx.get_notrace_functions()))


def network_graph(name: str, spec: InputSpec) -> dict[str, Any]:
    """{nodes: [{id, name, type, detail, shape, params, inputs}], params, input, output} for one
    image of `spec`'s size. Raises NetworkError / CustomNetError as build_model does."""
    with torch.device("meta"):
        model = build_model(name, spec).eval()
    try:
        # A tracer that leaves the web process's other threads alone (trainer/tracing.py).
        traced = fx.GraphModule(model, _tracer(name).trace(model))
    except (fx.proxy.TraceError, TypeError, RuntimeError, NotImplementedError) as exc:
        # Said in the graph's place, not a server error: the rest of the form still works.
        raise NetworkError(f"the graph of {name} cannot be drawn (torch.fx cannot trace it: {exc})") from None
    ShapeProp(traced).propagate(torch.empty(1, spec.channels, spec.height, spec.width, device="meta"))
    nodes: list[dict[str, Any]] = []
    kept: dict[fx.Node, int] = {}
    through: dict[fx.Node, list[int]] = {}
    for node in traced.graph.nodes:
        inputs = _kept_inputs(node, kept, through)
        shape = _shape(node)
        if _unpacks(node, kept):
            through[node] = inputs
            continue
        if node.op == "output" or shape is None:
            through[node] = []  # shape arithmetic (ViT's x.shape), not a path of the data
            continue
        kind, detail, params = _op(node, traced)
        kept[node] = len(nodes)
        label = "input" if node.op == "placeholder" else str(node.target if node.op != "call_function" else node.name)
        nodes.append(
            {"id": len(nodes), "name": label, "type": kind, "detail": detail, "shape": shape,
             "params": params, "inputs": inputs}
        )  # fmt: skip
    return {
        "network": name,
        "nodes": nodes,
        "params": sum(p.numel() for p in model.parameters()),
        "input": [spec.channels, spec.height, spec.width],
        "output": nodes[-1]["shape"] if nodes else [],
    }
