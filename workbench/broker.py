"""How the worker reaches its broker: what keeps it consuming across a broker restart (issue 11).

A Redis that is killed and comes back must never leave a worker alive but deaf. Imported only by
the worker (through the `worker_consumer` setting in workbench/celery.py): the web processes do
not pay for Celery's worker machinery.
"""

from __future__ import annotations

import functools

from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.transport import redis as kombu_redis

# Seconds between two attempts to reach a lost broker: short, so a worker consumes again within
# seconds of the broker's return (kombu's default grows to 30 s between attempts).
RECONNECT_INTERVAL_MAX_SECONDS = 3.0


class RedisTransport(kombu_redis.Transport):
    """kombu's Redis transport, except that it never forgets which server it belongs to.

    On a lost connection Celery's consumer first `collect()`s the kombu connection, which detaches
    the transport from its connection info (`transport.client = None`) even when closing the
    channel failed half-way, then closes the connection again. That second close, or the ack of
    a long task still running, must put the channel's unacked messages back and builds a Redis
    client from `transport.client.hostname`: an AttributeError, which Celery treats as an
    "Unrecoverable error". The worker then stops consuming for good yet stays alive, waiting for
    its running tasks (days of training) before it exits. Keeping the connection info lets those
    calls reach the server (or fail with a connection error that Celery does recover from).
    """

    @property
    def client(self):
        return self._client

    @client.setter
    def client(self, value) -> None:
        if value is not None or not hasattr(self, "_client"):
            self._client = value


TRANSPORT = f"{__name__}:{RedisTransport.__name__}"


class Consumer(CeleryConsumer):
    """The worker's consumer: the transport above for Redis, and a short reconnect interval."""

    def connection_for_read(self, heartbeat=None):
        connection = self.app.connection_for_read(heartbeat=heartbeat)
        if connection.transport_cls in ("redis", "rediss"):  # the memory:// broker of tests stays as it is
            # By name, not by class: the name is what the worker's log shows as the URL's scheme.
            connection = self.app.connection_for_read(heartbeat=heartbeat, transport=TRANSPORT)
        return self.ensure_connected(connection)

    def ensure_connected(self, conn):
        conn.ensure_connection = functools.partial(
            conn.ensure_connection,
            interval_start=1.0,
            interval_step=1.0,
            interval_max=RECONNECT_INTERVAL_MAX_SECONDS,
        )
        return super().ensure_connected(conn)
