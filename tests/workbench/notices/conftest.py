"""A real SMTP server (aiosmtpd) and a real HTTP server for webhooks, each on a free port."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message


class _Inbox(Message):
    def __init__(self) -> None:
        super().__init__()
        self.messages = []

    def handle_message(self, message) -> None:
        self.messages.append(message)


@pytest.fixture
def smtp_inbox(settings):
    inbox = _Inbox()
    with socket.socket() as probe:  # a free port: aiosmtpd's start-up check cannot follow port 0
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.NOTICE_SMTP_HOST, settings.NOTICE_SMTP_PORT = "127.0.0.1", port
    yield inbox.messages
    controller.stop()


class WebhookServer:
    def __init__(self) -> None:
        self.received: list[tuple[dict, bytes]] = []
        self.failures_left = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if server.failures_left:
                    server.failures_left -= 1
                    self.send_response(500)
                else:
                    server.received.append((dict(self.headers), body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def payloads(self) -> list[dict]:
        return [json.loads(body) for _, body in self.received]


@pytest.fixture
def webhook():
    server = WebhookServer()
    yield server
    server.httpd.shutdown()
