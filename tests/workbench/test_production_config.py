"""The production configuration: PostgreSQL through DATABASE_URL and an external Redis."""

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
import redis

from tests.conftest import REPO_ROOT

POSTGRES_ADMIN_URL = os.environ.get("WORKBENCH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
EXTERNAL_REDIS_URL = os.environ.get("WORKBENCH_TEST_EXTERNAL_REDIS_URL", "redis://127.0.0.1:6379/13")

pytestmark = [pytest.mark.slow]


def require(service: str, check) -> None:
    try:
        check()
    except Exception as error:
        # CI has both services: there a missing one is a failure, not a reason to skip.
        if os.environ.get("CI"):
            pytest.fail(f"{service} is not reachable: {error}")
        pytest.skip(f"{service} is not reachable here: {error}")


@pytest.fixture
def postgres_url():
    require("PostgreSQL", lambda: psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close())
    name = f"workbench_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def external_redis_url():
    require("Redis", lambda: redis.Redis.from_url(EXTERNAL_REDIS_URL, socket_connect_timeout=3).ping())
    return EXTERNAL_REDIS_URL


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180
    )


def test_it_migrates_and_reports_healthy_on_postgresql_and_external_redis(tmp_path, postgres_url, external_redis_url):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        DJANGO_SETTINGS_MODULE="workbench.settings",
        WORKBENCH_DATA_DIR=str(tmp_path),
        WORKBENCH_PRODUCTION="1",
        DATABASE_URL=postgres_url,
        REDIS_URL=external_redis_url,
        ALLOWED_HOSTS="workbench.example.org",
    )
    migrate = manage("migrate", "--no-input", env=env)
    assert migrate.returncode == 0, migrate.stderr
    deploy = manage("check", "--deploy", "--fail-level", "WARNING", "--database", "default", env=env)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    script = "import json; from workbench.health import health_report; print(json.dumps(health_report()))"
    result = manage("shell", "--verbosity", "0", "-c", script, env=env)
    assert result.returncode == 0, result.stderr
    checks = json.loads(result.stdout)["checks"]
    assert checks["database"] == {**checks["database"], "ok": True, "detail": "postgresql"}
    assert checks["broker"]["ok"] and checks["broker"]["detail"].startswith("redis ")
    assert checks["channel_layer"] == {**checks["channel_layer"], "ok": True, "detail": "RedisChannelLayer"}
    live = checks["live_channel_layer"]
    assert live == {**live, "ok": True, "detail": "RedisPubSubChannelLayer"}
    assert not (tmp_path / "db.sqlite3").exists()
