import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from datasets.events import publish
from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.core.groups import user_group_name


def test_it_publishes_build_progress_to_the_dataset_page_and_the_dashboard(owner):
    dataset = make_dataset_row(
        owner, name="d", status=Dataset.Status.BUILDING, progress_done=50, progress_total=200,
        images_per_second=25.0,
    )  # fmt: skip
    layer = get_channel_layer()

    async def subscribe():
        page, dashboard = await layer.new_channel(), await layer.new_channel()
        await layer.group_add(dataset.progress_group_name, page)
        await layer.group_add(user_group_name(dataset.owner_id), dashboard)
        return page, dashboard

    async def receive(channel):
        return await asyncio.wait_for(layer.receive(channel), 5)

    page, dashboard = async_to_sync(subscribe)()
    publish(dataset)
    progress = async_to_sync(receive)(page)
    assert progress == {
        "type": "dataset.progress",
        "payload": {"done": 50, "total": 200, "images_per_second": 25.0, "eta_seconds": 6.0, "status": "building"},
    }
    assert async_to_sync(receive)(dashboard)["payload"]["percent"] == 25.0
