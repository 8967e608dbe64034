"""Starts the real OpenID provider (tests/support/oidc_provider: django-oauth-toolkit) in a
process of its own on a free port, with a fresh RSA key and database, for the sign-in tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import REPO_ROOT
from tests.support.waiting import wait_until
from workbench.embedded_redis import free_port


@dataclass
class Provider:
    issuer: str
    client_id: str = "workbench"
    client_secret: str = "workbench-secret"


def _key_pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextmanager
def oidc_provider(redirect_uri: str) -> Iterator[Provider]:
    folder = Path(tempfile.mkdtemp(prefix="workbench-oidc-"))
    (folder / "key.pem").write_bytes(_key_pem())
    port = free_port()
    env = {
        **os.environ,
        "OIDC_PROVIDER_DIR": str(folder),
        "DJANGO_SETTINGS_MODULE": "tests.support.oidc_provider.settings",
    }
    log = (folder / "provider.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "tests.support.oidc_provider", str(port), redirect_uri],
                               cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    issuer = f"http://127.0.0.1:{port}/o"
    try:
        wait_until(lambda: process.poll() is None and _answers(f"{issuer}/.well-known/openid-configuration"),
                   what=lambda: "the OpenID provider to answer:\n" + (folder / "provider.log").read_text()[-2000:],
                   timeout=60)  # fmt: skip
        yield Provider(issuer=issuer)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
