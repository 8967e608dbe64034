"""Live stream fan-out: many authenticated websocket viewers of one run, against a real daphne + Redis.

A publisher process stores and publishes one metrics event every 1/rate seconds through
run_events_append (the worker's path: bulk insert, then group_send after commit). Each viewer
connects to /ws/runs/<id>/, asks for its replay ({"since": 0}), then records every live event:
latency = receipt time - the time taken just before run_events_append (so it includes the database
write, Redis and daphne), and which sequence numbers never arrived live ("lost": a real client would
get them back through a replay, which this benchmark deliberately does not ask for).

Baseline: the same stream to a single viewer, in the same run. Viewers share this process's event
loop, so on a small machine their own scheduling delay is part of the latency measured.

The settings are workbench.settings with the channel layer's Redis socket_timeout set to None
(written to the temporary data dir), and with --layer pubsub the RedisPubSubChannelLayer.
(workbench.settings itself allows 30 s since 23:12 UTC; before, redis-py 8's default 5 s killed any
consumer idle for 5 s, e.g. while 200 viewers were still connecting.)

    .venv/bin/python bench/bench_live_stream.py [--viewers 200] [--rate 20] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


SETTINGS = {
    "core": """from workbench.settings import *  # noqa
CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [{"address": REDIS_URL, "socket_timeout": None}]
""",
    "pubsub": """from workbench.settings import *  # noqa
CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                              "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]}}}
""",
}


def setup(data_dir: str, layer: str = "") -> None:
    if layer:
        Path(data_dir, "bench_live_settings.py").write_text(SETTINGS[layer])
    sys.path.insert(0, data_dir)
    os.environ.update(DJANGO_SETTINGS_MODULE="bench_live_settings", WORKBENCH_DATA_DIR=data_dir)
    import django

    django.setup()


def publish(data_dir: str, run_id: int, rate: float, seconds: float, start_at: float, batch: int) -> None:
    """`batch` events per append: 1 = each event published alone; the launcher stores and publishes
    what the trainer wrote every 0.5 s, i.e. batches of ~10 at 20 events/s."""
    setup(data_dir)
    from workbench.runs.services import run_events_append

    while time.time() < start_at:
        time.sleep(0.01)
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


async def viewer(url: str, origin: str, cookie: str, until: asyncio.Event, record: dict) -> None:
    from websockets.asyncio.client import connect

    async with connect(url, origin=origin, additional_headers={"Cookie": cookie}, open_timeout=60,
                       max_size=None) as socket:  # fmt: skip
        await socket.send(json.dumps({"since": 0}))
        replay = json.loads(await socket.recv())
        record["ready"] = replay["last_seq"]
        while not until.is_set():
            try:
                message = json.loads(await asyncio.wait_for(socket.recv(), 0.5))
            except TimeoutError:
                continue
            now = time.time()
            for event in message.get("events", []):
                if "sent" in event:
                    record["latencies"].append(now - event["sent"])
                    record["seqs"].append(event["seq"])


async def watch(url: str, origin: str, cookie: str, viewers: int, seconds: float, publisher) -> list[dict]:
    records = [{"latencies": [], "seqs": []} for _ in range(viewers)]
    until = asyncio.Event()
    tasks = []
    for record in records:  # connect in waves, as page loads would
        tasks.append(asyncio.create_task(viewer(url, origin, cookie, until, record)))
        await asyncio.sleep(0.005)
    while sum("ready" in record for record in records) < viewers:
        await asyncio.sleep(0.1)
    publisher.start()
    await asyncio.sleep(seconds + 3.0)
    until.set()
    await asyncio.gather(*tasks)
    publisher.join()
    return records


def measure(args, viewers: int, context, run_id: int, url: str, origin: str, cookie: str, data_dir: str, daphne):
    import psutil

    from workbench.runs.models import Run

    before = Run.objects.get(pk=run_id).last_seq
    start_at = time.time() + 1.0
    publisher = context.Process(target=publish, args=(data_dir, run_id, args.rate, args.seconds, start_at, args.batch))
    server, me = psutil.Process(daphne.pid), psutil.Process()
    server_cpu, my_cpu = sum(server.cpu_times()[:2]), sum(me.cpu_times()[:2])
    records = asyncio.run(watch(url, origin, cookie, viewers, args.seconds, publisher))
    server_cpu, my_cpu = sum(server.cpu_times()[:2]) - server_cpu, sum(me.cpu_times()[:2]) - my_cpu
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
    parser.add_argument("--batch", type=int, default=1, help="events per publish (the launcher: ~10)")
    parser.add_argument(
        "--layer", choices=sorted(SETTINGS), default="core",
        help="core: RedisChannelLayer as configured (a Redis list per consumer); "
        "pubsub: RedisPubSubChannelLayer (one Redis message per group per daphne process)",
    )  # fmt: skip
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="bench-live-")
    from tests.services import start_test_redis

    os.environ["REDIS_URL"] = start_test_redis(Path(data_dir))
    setup(data_dir, args.layer)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from datasets.models import Dataset
    from workbench.embedded_redis import free_port
    from workbench.runs.services import run_create
    from workbench.supervisor import die_with_parent

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("viewer", password="x" * 20)
    dataset = Dataset.objects.create(owner=owner, name="bench", status=Dataset.Status.READY)
    run = run_create(owner=owner, dataset=dataset, name="bench", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    client = Client()
    client.force_login(owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{data_dir}"}
    daphne = subprocess.Popen(
        [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port), "workbench.asgi:application"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{origin}/healthz", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.1)
        url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/"
        context = multiprocessing.get_context("spawn")
        baseline = measure(args, 1, context, run.pk, url, origin, cookie, data_dir, daphne)
        ours = measure(args, args.viewers, context, run.pk, url, origin, cookie, data_dir, daphne)
    finally:
        daphne.terminate()
        daphne.wait(timeout=10)

    print(f"\n{args.rate:g} metric events/s in batches of {args.batch} for {args.seconds:g} s, one run, "
          f"real daphne + Redis, {args.layer} layer\n")  # fmt: skip
    print("| viewers | events | deliveries | p50 ms | p95 ms | max ms | lost | daphne CPU s | viewers CPU s "
          "| p95 vs 1 |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in (ours, baseline):
        ratio = row["p95"] / baseline["p95"]
        print(f"| {row['viewers']} | {row['events']:,} | {row['deliveries']:,} | {row['p50']:.1f} | {row['p95']:.1f} | "
              f"{row['max']:.1f} | {row['lost']} | {row['daphne_cpu']:.1f} | {row['viewers_cpu']:.1f} | "
              f"{ratio:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
