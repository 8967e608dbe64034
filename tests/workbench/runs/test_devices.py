"""The device request: one shape, read and written through DeviceRequest."""

import pytest

from workbench.core.errors import RequestError
from workbench.runs.devices import DeviceRequest
from workbench.runs.validators import parse_device_request

STORED = [
    ({"kind": "cpu"}, DeviceRequest.cpu(), 1, "the CPU"),
    ({"kind": "count", "count": 2}, DeviceRequest.gpus(2), 2, "2 GPUs"),
    (
        {"kind": "specific", "host": "w@a", "indices": [1, 3]},
        DeviceRequest.on_host("w@a", [1, 3]),
        2,
        "GPU 1, 3 on w@a",
    ),
    ({"kind": "auto"}, DeviceRequest.auto(), 1, "1 GPU"),
]


@pytest.mark.parametrize(("stored", "request_", "count", "text"), STORED)
def test_it_reads_and_writes_the_stored_json_unchanged(stored, request_, count, text):
    assert DeviceRequest.from_dict(stored) == request_
    assert request_.to_dict() == stored
    assert request_.device_count == count and request_.text == text


def test_it_reads_an_empty_stored_request_as_one_device():
    assert DeviceRequest.from_dict({}).device_count == 1 and DeviceRequest.from_dict(None).is_auto


def test_it_parses_what_users_type():
    assert parse_device_request("cpu").is_cpu
    assert parse_device_request(3) == DeviceRequest.gpus(3)
    assert parse_device_request("w@a:0,2") == DeviceRequest.on_host("w@a", (0, 2))
    assert parse_device_request("auto").resolved(gpus_online=True) == DeviceRequest.gpus(1)
    assert parse_device_request(None).resolved(gpus_online=False) == DeviceRequest.cpu()
    with pytest.raises(RequestError):
        parse_device_request("w@a:1,1")
