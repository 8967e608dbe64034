"""The model zoo (timm's networks, trainer/zoo.py): one trains and exports end to end; each family
is built on the meta device; unknown names and sizes a transformer cannot take are refused."""

from __future__ import annotations

import pytest
import torch

from trainer.checkpoint import CheckpointStore
from trainer.config import ConfigError, config_from_dict
from trainer.events import ListReporter
from trainer.export import export_run
from trainer.netgraph import network_graph
from trainer.networks import InputSpec, NetworkError, build_model, check_input_size, network_cost
from trainer.protocol import EXIT_DONE
from trainer.run import train
from trainer.zoo import TIMM_NETWORKS, ZOO, network_family

from .conftest import make_config


def test_it_trains_a_timm_network_and_exports_it(tmp_path, rgb16):
    cfg = make_config(tmp_path / "run", rgb16, network="timm/resnet18d", epochs=1, batch_size=8)
    assert train(cfg, reporter=ListReporter()) == EXIT_DONE
    out = tmp_path / "out"
    # The bundle: the zoo's own path (TorchScript and ONNX are the same code for every network).
    export_run(CheckpointStore(tmp_path / "run").latest(), out, ("bundle",))
    assert (out / "model.safetensors").is_file()
    readme = (out / "README.txt").read_text()
    assert 'timm.create_model("resnet18d", pretrained=False, num_classes=3, in_chans=3)' in readme


def test_it_builds_the_families_with_their_own_paths_for_gray_images():
    families = {entry.family for entry in ZOO.values()}
    assert families >= {"ConvNeXt", "EfficientNet", "EfficientNetV2", "RegNet", "ResNet-RS", "ViT", "DeiT", "Swin"}
    # RegNet is built on the CPU and moved (no meta kernel for its torch.unique); the transformers
    # for the images' size; gray images through timm's in_chans.
    for network in ("timm/regnetx_002", "timm/deit_tiny_patch16_224", "timm/swin_tiny_patch4_window7_224"):
        with torch.device("meta"):
            model = build_model(network, InputSpec(1, 32, 32, 5))
        assert model(torch.empty(2, 1, 32, 32, device="meta")).shape == (2, 5), network
    params, gflops = network_cost("timm/convnext_atto", InputSpec(3, 224, 224, 1000))
    assert params == 3_695_520 and 0.5 < gflops < 0.6  # the model card's 3.7M and 0.55 GFLOPs
    assert network_family("timm/swin_tiny_patch4_window7_224") == "timm Swin"


def test_it_refuses_an_unknown_timm_name():
    with pytest.raises(NetworkError, match="'timm/resnet9000' is not one of"):
        build_model("timm/resnet9000", InputSpec(3, 32, 32, 2))
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"run_dir": "run", "network": "timm/resnet9000"}, check_paths=False)
    assert refused.value.field == "network" and "timm/convnext_atto" in str(refused.value)


def test_it_names_the_crop_that_fits_a_transformers_patches():
    with pytest.raises(NetworkError, match=r"multiples of 16 .*dataset is 50x50; set data.crop_size to 48"):
        check_input_size("timm/vit_tiny_patch16_224", InputSpec(3, 50, 50, 2))
    with pytest.raises(NetworkError, match=r"multiples of 32"):
        check_input_size("timm/swin_tiny_patch4_window7_224", InputSpec(3, 48, 48, 2))
    check_input_size("timm/swin_tiny_patch4_window7_224", InputSpec(3, 64, 64, 2))


def test_it_draws_the_graph_of_a_network_plain_fx_cannot_trace():
    # tf_efficientnetv2's "same" padding branches on sizes: timm's own no-trace list keeps it whole.
    graph = network_graph("timm/tf_efficientnetv2_b0", InputSpec(3, 32, 32, 4))
    assert graph["output"] == [4] and len(graph["nodes"]) > 100
    assert len(TIMM_NETWORKS) >= 30
