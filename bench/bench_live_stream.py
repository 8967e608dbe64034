"""Live stream fan-out: many authenticated websocket viewers of one run, against a real daphne + Redis.

A publisher process stores and publishes metrics events at --rate per second through
run_events_append (the worker's path: bulk insert, then group_send after commit), --batch events per
append (the launcher appends what the trainer wrote every 0.5 s: batches of ~10 at 20 events/s).
Each viewer connects to /ws/runs/<id>/, asks for its replay ({"since": 0}), then records every live
event: latency = receipt time - the time taken just before run_events_append (so it includes the
database write, Redis and daphne), and which sequence numbers never arrived live ("lost": a real
client would get them back through a replay, which this benchmark deliberately does not ask for).

Ours: the workbench as configured (run streams on the `live` channel layer alias, Redis pub/sub,
and one subscription per daphne process and run, relayed to its sockets: workbench/runs/fanout.py).
Baselines, in the same run: the same consumer with Channels' usual pattern (a channel per socket in
the run's group), on pub/sub and on the core RedisChannelLayer (one Redis queue entry per socket);
and ours with a single viewer. Viewers share this process's event loop, so on a small machine
their own scheduling delay is part of the latency measured.

    .venv/bin/python bench/bench_live_stream.py [--viewers 200] [--rate 20] [--seconds 15] [--batch 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


SETTINGS = {
    "configured": "from workbench.settings import *  # noqa\n",
    "core": """from workbench.settings import *  # noqa
CHANNEL_LAYERS[LIVE_CHANNEL_LAYER] = CHANNEL_LAYERS["default"]
""",
}
# The baselines' server: the same consumer (login, ownership, replay) with Channels' usual pattern
# for live events instead of ours: a channel per socket in the run's group, each message dispatched
# through Channels' consumer machinery.
BASELINE_ASGI = """from workbench.asgi import application as workbench_application  # noqa: F401 (sets Django up)
from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.urls import path

from workbench.runs.web.consumers import RunConsumer


class ChannelPerSocketConsumer(RunConsumer):
    channel_layer_alias = settings.LIVE_CHANNEL_LAYER

    async def join_live(self):
        await self.channel_layer.group_add(self.group_name, self.channel_name)

    async def leave_live(self):
        await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def run_events(self, message):
        await self.relay(message["text"])


routes = URLRouter([path("ws/runs/<int:pk>/", ChannelPerSocketConsumer.as_asgi())])
application = ProtocolTypeRouter({"http": workbench_application,
                                  "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(routes))})
"""
# name -> (settings of daphne and the publisher, daphne's application)
SETUPS = {
    "ours: pub/sub, one subscription per process and run": ("configured", "workbench.asgi:application"),
    "baseline: pub/sub, a channel per socket": ("configured", "bench_live_asgi:application"),
    "baseline: core layer, a channel per socket": ("core", "bench_live_asgi:application"),
}


def setup(data_dir: str, layer: str) -> None:
    """Django in this process with the settings of `layer` (modules in the data dir, see main)."""
    sys.path.insert(0, data_dir)
    os.environ.update(DJANGO_SETTINGS_MODULE=f"bench_live_{layer}", WORKBENCH_DATA_DIR=data_dir)
    import django

    django.setup()


def publish(data_dir: str, layer: str, run_id: int, rate: float, seconds: float, batch: int) -> None:
    setup(data_dir, layer)
    from workbench.runs.lifecycle import run_events_append

    # The schedule starts once Django is set up here (seconds after the process started): a start
    # time fixed by the parent would be long past, and catching up would send a burst, not a rate.
    start_at = time.time() + 0.2
    interval, step, next_at = batch / rate, 0, start_at
    end = start_at + seconds
    while next_at < end:
        sent = time.time()
        events = []
        for _ in range(batch):
            step += 1
            events.append({"type": "metrics", "time": sent, "step": step, "epoch": step / 100, "loss": 1.0 / step,
                           "sent": sent})  # fmt: skip
        run_events_append(run_id=run_id, events=events)
        next_at += interval
        time.sleep(max(0.0, next_at - time.time()))


async def viewer(url: str, origin: str, cookie: str, record: dict) -> None:
    """One socket: its replay, then every live event until watch() closes it. No per-message
    timeout: on a 2-core machine this process's own overhead is part of what is measured."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async with connect(url, origin=origin, additional_headers={"Cookie": cookie}, open_timeout=60,
                       max_size=None) as socket:  # fmt: skip
        await socket.send(json.dumps({"since": 0}))
        replay = json.loads(await socket.recv())
        record["socket"] = socket
        record["ready"] = replay["last_seq"]
        try:
            async for text in socket:
                now = time.time()
                for event in json.loads(text).get("events", []):
                    if "sent" in event:
                        record["latencies"].append(now - event["sent"])
                        record["seqs"].append(event["seq"])
        except ConnectionClosed:
            pass


async def watch(url: str, origin: str, cookie: str, viewers: int, publisher) -> list[dict]:
    records = [{"latencies": [], "seqs": []} for _ in range(viewers)]
    tasks = []
    for record in records:  # connect in waves, as page loads would
        tasks.append(asyncio.create_task(viewer(url, origin, cookie, record)))
        await asyncio.sleep(0.005)
    while sum("ready" in record for record in records) < viewers:
        for task in tasks:
            if task.done() and task.exception():
                raise task.exception()
        await asyncio.sleep(0.1)
    publisher.start()
    while publisher.is_alive():
        await asyncio.sleep(0.1)
    await asyncio.sleep(2.0)  # the last events' deliveries
    await asyncio.gather(*(record["socket"].close() for record in records))
    await asyncio.gather(*tasks)
    publisher.join()
    for record in records:
        del record["socket"]
    return records


def measure(args, setup_name: str, viewers: int, run_id: int, cookie: str, data_dir: str) -> dict:
    """`viewers` sockets on a new daphne set up as SETUPS[setup_name], while the publisher runs."""
    import psutil
    from live_server import start_daphne

    from workbench.runs.models import Run

    layer, application = SETUPS[setup_name]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{data_dir}", "DJANGO_SETTINGS_MODULE": f"bench_live_{layer}"}
    daphne, origin = start_daphne(env, Path(data_dir, f"daphne-{len(os.listdir(data_dir))}.log"), application)
    url = f"ws{origin.removeprefix('http')}/ws/runs/{run_id}/"
    try:
        before = Run.objects.get(pk=run_id).last_seq
        context = multiprocessing.get_context("spawn")
        publisher = context.Process(target=publish, args=(data_dir, layer, run_id, args.rate, args.seconds, args.batch))
        server, me = psutil.Process(daphne.pid), psutil.Process()
        server_cpu, my_cpu = sum(server.cpu_times()[:2]), sum(me.cpu_times()[:2])
        records = asyncio.run(watch(url, origin, cookie, viewers, publisher))
        server_cpu, my_cpu = sum(server.cpu_times()[:2]) - server_cpu, sum(me.cpu_times()[:2]) - my_cpu
    finally:
        daphne.terminate()
        daphne.wait(timeout=10)
    after = Run.objects.get(pk=run_id).last_seq
    expected = set(range(before + 1, after + 1))
    latencies = sorted(latency for record in records for latency in record["latencies"])
    lost = sum(len(expected - set(record["seqs"])) for record in records)
    quantile = statistics.quantiles(latencies, n=100)
    return {
        "viewers": viewers,
        "events": len(expected),
        "deliveries": len(latencies),
        "p50": quantile[49] * 1000,
        "p95": quantile[94] * 1000,
        "max": latencies[-1] * 1000,
        "lost": lost,
        "daphne_cpu": server_cpu,
        "viewers_cpu": my_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="metric events per second")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--batch", type=int, default=10, help="events per append (the launcher: ~10; 1: each alone)")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="bench-live-")
    from tests.services import start_test_redis

    os.environ["REDIS_URL"] = start_test_redis(Path(data_dir))
    for layer, text in SETTINGS.items():
        Path(data_dir, f"bench_live_{layer}.py").write_text(text)
    Path(data_dir, "bench_live_asgi.py").write_text(BASELINE_ASGI)
    setup(data_dir, "configured")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from datasets.models import Dataset
    from workbench.runs.services import run_create

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("viewer", password="x" * 20)
    dataset = Dataset.objects.create(owner=owner, name="bench", status=Dataset.Status.READY)
    run = run_create(owner=owner, dataset=dataset, name="bench", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    client = Client()
    client.force_login(owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    rows = [(name, measure(args, name, args.viewers, run.pk, cookie, data_dir)) for name in SETUPS]
    single = measure(args, next(iter(SETUPS)), 1, run.pk, cookie, data_dir)
    rows.append(("baseline: ours, a single viewer", single))
    print(f"\n{args.rate:g} metric events/s in batches of {args.batch} for {args.seconds:g} s, one run, real daphne + "
          f"Redis, load average {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| setup | viewers | events | deliveries | p50 ms | p95 ms | max ms | lost | daphne CPU s | viewers CPU s "
          "| p95 vs ours |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ours = rows[0][1]
    for name, row in rows:
        print(f"| {name} | {row['viewers']} | {row['events']:,} | {row['deliveries']:,} | {row['p50']:.1f} | "
              f"{row['p95']:.1f} | {row['max']:.1f} | {row['lost']} | {row['daphne_cpu']:.1f} | "
              f"{row['viewers_cpu']:.1f} | {row['p95'] / ours['p95']:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
