"""Settings for the workbench, read from the environment (see README.md for every variable).

The defaults run everything on one machine with nothing but what pip installs: SQLite in the
data dir and, when REDIS_URL is unset, the embedded Redis-compatible server that
`manage.py runworkbench` starts, hands to its children through REDIS_URL and records in the data
dir for the other `manage.py` commands.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from workbench.embedded_redis import running_url
from workbench.env import (
    asks_for_help,
    data_dir_or_exit,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_path,
    env_path_list,
    env_str,
    read_or_create_secret,
    throwaway_secret,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# Only the run command makes a data dir; any other process needs one that exists (env.py says why).
# Help (`manage.py runworkbench --help`) needs none and writes nothing: no data dir, no secret key.
RUN_COMMAND = "runworkbench"
HELP_ONLY = asks_for_help(sys.argv)
DATA_DIR = data_dir_or_exit(
    env_path("WORKBENCH_DATA_DIR", BASE_DIR / "var"),
    create=sys.argv[1:2] == [RUN_COMMAND] and not HELP_ONLY,
    required=not HELP_ONLY,
)

# Production mode turns on every HTTPS and cookie hardening that `check --deploy` asks for;
# it is for a deployment behind TLS (see docs/deployment.md).
PRODUCTION = env_bool("WORKBENCH_PRODUCTION", False)
DEBUG = env_bool("DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off when WORKBENCH_PRODUCTION is on")

# Help signs nothing: a key of its own, never written.
SECRET_KEY = env_str("SECRET_KEY") or (
    throwaway_secret() if HELP_ONLY else read_or_create_secret(DATA_DIR / "secret_key")
)
if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters long")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# A refused form (an expired page, a token of a past session) explains itself in the layout.
CSRF_FAILURE_VIEW = "workbench.views.csrf_failure"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "channels",
    "workbench",
    "workbench.directory",
    "workbench.projects",
    "workbench.audit",
    "workbench.workers",
    "workbench.runs",
    "workbench.weights",
    "datasets",
    "workbench.inference",
    "workbench.benchmarks",
    "workbench.searches",
    "workbench.labelchecks",
    "workbench.notices",
    "drf_spectacular",
    "drf_spectacular_sidecar",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # After authentication: a change is recorded with its actor (DRF's token user is set on the request by the view).
    "workbench.audit.middleware.AuditMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "workbench.middleware.LoginRequiredMiddleware",
    "workbench.middleware.BrokerUnavailableMiddleware",
]

ROOT_URLCONF = "workbench.urls"
ASGI_APPLICATION = "workbench.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "db.sqlite3",
            "OPTIONS": {
                # WAL lets the web, the worker and the trainer readers work at once; IMMEDIATE
                # takes the write lock at BEGIN so two allocators never both read "free" and
                # then collide on the write.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            # The Celery worker and daphne run in other processes during tests: they need a
            # test database on disk, not SQLite's private in-memory one.
            "TEST": {"NAME": str(DATA_DIR / "test-db.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
# Unset: the embedded server of the workbench running on this data dir. The run command records
# its port there, so `manage.py train --wait` in a second terminal queues to the broker its worker
# listens to ("" when no workbench runs: the commands that queue work then say so at once).
EMBEDDED_REDIS = not REDIS_URL
if EMBEDDED_REDIS:
    REDIS_URL = running_url(DATA_DIR)
# The channel layer alias of the run streams (see below); every other stream uses "default".
LIVE_CHANNEL_LAYER = "live"
# A page that needs Redis (sign-in's throttle, anything cached) waits at most this long for it, then
# answers 503 with words (workbench.middleware.BrokerUnavailableMiddleware) instead of a 500 after
# redis-py's 5 s default, or never while Redis is stalled (SIGSTOP, a full disk, a swapped host).
REDIS_REQUEST_TIMEOUT_SECONDS = env_float("WORKBENCH_REDIS_REQUEST_TIMEOUT_SECONDS", 2.0, minimum=0.1)


def redis_cache(url: str) -> dict:
    """The cache on Redis at `url`, every call bounded by REDIS_REQUEST_TIMEOUT_SECONDS."""
    seconds = REDIS_REQUEST_TIMEOUT_SECONDS
    timeouts = {"socket_timeout": seconds, "socket_connect_timeout": seconds}
    return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "OPTIONS": timeouts}


if REDIS_URL:
    CACHES = {"default": redis_cache(REDIS_URL)}
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # Slow browsers must not slow the others: drop, do not block (clients replay gaps).
            # channels_redis waits on BZPOPMIN for 5 s and redis-py 8 times reads out after 5 s
            # by default, which would drop idle sockets: give reads more time than the wait.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1500, "expiry": 30},
        },
        # The run streams (/ws/runs/<id>/): hundreds of viewers of one run. Redis pub/sub carries
        # each publish once to each daphne process, which relays it to its sockets of that run
        # (workbench/runs/fanout.py); the core layer above would queue one copy per socket in
        # Redis. Delivery is at most once: a client replays whatever it missed.
        LIVE_CHANNEL_LAYER: {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        },
    }
else:
    # Without a broker the pages still work (manage.py, tests of views); health says what is off.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": DATA_DIR / "cache",
        }
    }
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"},
        LIVE_CHANNEL_LAYER: {"BACKEND": "channels.layers.InMemoryChannelLayer"},
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# One backend, the throttled one: every password check (login page, admin, API token, whatever
# comes next) is counted and refused by the same login throttle (workbench/throttle.py).
AUTHENTICATION_BACKENDS = ["workbench.throttle.ThrottledModelBackend", "workbench.throttle.ThrottledOIDCBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Failed logins allowed per account and per client address within the window, before the
# login form refuses further attempts for the rest of the window.
# Sign-in through the lab's LDAP directory (workbench/directory/): off without a URL.
LDAP_URL = env_str("WORKBENCH_LDAP_URL")
LDAP_USER_DN = env_str("WORKBENCH_LDAP_USER_DN", "uid={username},ou=people,dc=example,dc=org")
LDAP_GROUP_BASE = env_str("WORKBENCH_LDAP_GROUP_BASE")
# The directory's groups as projects, roles and staff: "group -> project:role; group -> staff".
DIRECTORY_GROUPS = env_str("WORKBENCH_DIRECTORY_GROUPS")
# Sign-in through the lab's OpenID provider (workbench/directory/oidc.py): off without an issuer.
# Its endpoints come from the issuer's discovery document; the code flow uses PKCE.
OIDC_ISSUER = env_str("WORKBENCH_OIDC_ISSUER")
OIDC_RP_CLIENT_ID = env_str("WORKBENCH_OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("WORKBENCH_OIDC_CLIENT_SECRET")
OIDC_GROUPS_CLAIM = env_str("WORKBENCH_OIDC_GROUPS_CLAIM", "groups")
OIDC_PROVIDER_NAME = env_str("WORKBENCH_OIDC_NAME", "the lab's sign-in")
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_RP_SCOPES = "openid email profile"
OIDC_TIMEOUT = 10
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?signin=failed"
LOGIN_FAILURES_PER_ACCOUNT = env_int("WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT", 5, minimum=1)
LOGIN_FAILURES_PER_IP = env_int("WORKBENCH_LOGIN_FAILURES_PER_IP", 20, minimum=1)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("WORKBENCH_LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=1)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("WORKBENCH_STATIC_ROOT", DATA_DIR / "static")
# daphne serves static files itself in the single-machine setup; behind nginx, turn this off and
# let nginx serve STATIC_ROOT after collectstatic.
SERVE_STATIC = env_bool("WORKBENCH_SERVE_STATIC", True)

# Uploads above this size stream to a temp file in the data dir instead of memory.
FILE_UPLOAD_TEMP_DIR = DATA_DIR / "uploads" / "tmp"
if not HELP_ONLY:
    FILE_UPLOAD_TEMP_DIR.mkdir(parents=True, exist_ok=True)
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
MAX_UPLOAD_BYTES = env_int("WORKBENCH_MAX_UPLOAD_BYTES", 20 * 1024**3, minimum=1)

# Weights a run may start from (`manage.py weights`, the Weights page): the workbench's own store
# and the caches an online machine fills (torchvision's, the Hugging Face hub's for timm), read
# where the libraries put them.
# Nothing is downloaded on a worker; `manage.py weights fetch` does it on a machine that is online.
WEIGHTS_DIR = env_path("WORKBENCH_WEIGHTS_DIR", DATA_DIR / "weights")
_CACHE_HOME = env_path("XDG_CACHE_HOME", Path.home() / ".cache")
TORCH_HUB_CHECKPOINTS = env_path("TORCH_HOME", _CACHE_HOME / "torch") / "hub" / "checkpoints"
HF_HUB_CACHE = env_path("HF_HUB_CACHE", env_path("HF_HOME", _CACHE_HOME / "huggingface") / "hub")

# Folders on this server that users may import datasets from.
IMPORT_ROOTS = env_path_list("WORKBENCH_IMPORT_ROOTS")

# What a dataset import may cost. An archive is refused as soon as what it expands to passes any
# of these, counted on the bytes really written while streaming (headers can lie).
ARCHIVE_MAX_BYTES = env_int("WORKBENCH_ARCHIVE_MAX_BYTES", 50 * 1024**3, minimum=1)
ARCHIVE_MAX_MEMBERS = env_int("WORKBENCH_ARCHIVE_MAX_MEMBERS", 2_000_000, minimum=1)
# Expanded bytes per archive byte read. Photos barely compress (~1.05x); a zip bomb is ~1000x.
ARCHIVE_MAX_RATIO = env_float("WORKBENCH_ARCHIVE_MAX_RATIO", 100.0, minimum=1.0)
# The ratio is only judged once this much has been expanded, so a tiny archive of text files
# (which compress well) is not refused for a ratio that means nothing at that size.
ARCHIVE_RATIO_GRACE_BYTES = env_int("WORKBENCH_ARCHIVE_RATIO_GRACE_BYTES", 1024**2, minimum=0)
# Pillow's decompression-bomb limit, in pixels per image. Pillow warns above it and the import
# turns the warning into a refusal (Pillow itself errors only at twice this).
MAX_IMAGE_PIXELS = env_int("WORKBENCH_MAX_IMAGE_PIXELS", 89_478_485, minimum=1)
# A source's labels are read in a child process under these kernel limits (datasets/label_runner.py),
# never in the web process: its address space (MiB; Python, numpy and Pillow take ~300 of it) and
# its CPU seconds. A COCO file of a large public set needs about 2 GiB; a check past them is refused.
LABEL_READER_MEMORY_MB = env_int("WORKBENCH_LABEL_READER_MEMORY_MB", 3072, minimum=512)
LABEL_READER_CPU_SECONDS = env_int("WORKBENCH_LABEL_READER_CPU_SECONDS", 300, minimum=5)
# The interactive label check (the wizard's and the API's) answers a person waiting, so it gets less
# CPU time than a build's reading above; past it the check says so and the build still reads every file.
LABEL_CHECK_CPU_SECONDS = env_int("WORKBENCH_LABEL_CHECK_CPU_SECONDS", 60, minimum=5)
# The pixel count bounds neither memory nor work (a 155 KB PNG of 1 x 80,000,000 pixels passes it):
# every user image is also refused, from its header, when its longest side or its sides' ratio is
# over these (datasets/images.py, check_image_size). Decode and resize then stay under ~1 GB.
MAX_IMAGE_INPUT_SIDE = env_int("WORKBENCH_MAX_IMAGE_INPUT_SIDE", 16_384, minimum=1)
MAX_IMAGE_ASPECT = env_float("WORKBENCH_MAX_IMAGE_ASPECT", 20.0, minimum=1.0)
# Largest output image side a user may ask for.
MAX_IMAGE_SIDE = env_int("WORKBENCH_MAX_IMAGE_SIDE", 4096, minimum=1)
# Builds of at most this many images run in the task's own process: starting worker processes
# costs about a second, more than such a build takes.
DATASET_INLINE_MAX_IMAGES = env_int("WORKBENCH_DATASET_INLINE_MAX_IMAGES", 64, minimum=0)
# Worker processes per build; 0 means one per available core.
DATASET_BUILD_WORKERS = env_int("WORKBENCH_DATASET_BUILD_WORKERS", 0, minimum=0)

REST_FRAMEWORK = {
    # Token first: an API client without credentials gets 401 with a WWW-Authenticate header.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # A JSON body must be an object (workbench/core/parsers.py): `5`, `null` or a list get a 400.
    "DEFAULT_PARSER_CLASSES": [
        "workbench.core.parsers.JSONObjectParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "workbench.inference.schema.WorkbenchAutoSchema",
}
# Several models have a field named "state" with choices of their own: the schema names each set.
SPECTACULAR_SETTINGS = {
    "ENUM_NAME_OVERRIDES": {
        "RunStateEnum": "workbench.runs.models.Run.State",
        "SearchStateEnum": "workbench.searches.models.Search.State",
        "TrialStateEnum": "workbench.searches.models.Trial.State",
    },
}

# Celery: JSON only; a task is acknowledged after it finishes so a dead worker's task is
# redelivered; one task prefetched at a time so a long training task never sits behind another.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis redelivers an unacknowledged task after the visibility timeout: it must outlast the
# longest training run, or a healthy run would be started twice.
LONGEST_RUN_SECONDS = env_int("WORKBENCH_LONGEST_RUN_SECONDS", 14 * 24 * 3600, minimum=60)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": LONGEST_RUN_SECONDS + 3600}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"visibility_timeout": LONGEST_RUN_SECONDS + 3600}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Workers announce themselves and their devices this often; a worker silent for
# WORKER_TIMEOUT_SECONDS is offline.
HEARTBEAT_SECONDS = env_float("WORKBENCH_HEARTBEAT_SECONDS", 5.0, minimum=0.1)

# Notices by email (workbench/notices/): off without an SMTP host; the page says so.
NOTICE_SMTP_HOST = env_str("WORKBENCH_SMTP_HOST")
NOTICE_SMTP_PORT = env_int("WORKBENCH_SMTP_PORT", 25, minimum=1)
NOTICE_SMTP_USER = env_str("WORKBENCH_SMTP_USER")
NOTICE_SMTP_PASSWORD = env_str("WORKBENCH_SMTP_PASSWORD")
NOTICE_SMTP_TLS = env_bool("WORKBENCH_SMTP_TLS")
NOTICE_FROM = env_str("WORKBENCH_NOTICE_FROM", "workbench@localhost")
WORKER_TIMEOUT_SECONDS = env_float("WORKBENCH_WORKER_TIMEOUT_SECONDS", 20.0, minimum=1.0)

# Simulated GPUs let a CPU-only machine demonstrate and test multi-GPU scheduling: a worker
# announces this many fake GPUs whose training runs on the CPU. Never in production.
SIMULATED_GPUS = env_int("WORKBENCH_SIMULATED_GPUS", 0, minimum=0)
if PRODUCTION and SIMULATED_GPUS:
    raise ImproperlyConfigured("WORKBENCH_SIMULATED_GPUS cannot be used with WORKBENCH_PRODUCTION")
# The memory each simulated GPU has: a benchmark on simulated GPUs records a batch that needs more
# as out of memory, as a real GPU of this size would (trainer/footprint.py).
SIMULATED_GPU_MEMORY_MB = env_int("WORKBENCH_SIMULATED_GPU_MEMORY_MB", 16384, minimum=1)
# A run interrupted by a lost worker is resumed from its checkpoint at most this many times.
# The Slurm executor (docs/deployment.md): runs may go to a Slurm cluster as batch jobs. The
# workbench drives Slurm's own command line tools, which find the cluster through SLURM_CONF
# (read by them, not here). DATA_DIR must be on storage the compute nodes share.
SLURM_ENABLED = env_bool("WORKBENCH_SLURM", False)
SLURM_PARTITION = env_str("WORKBENCH_SLURM_PARTITION")
SLURM_ACCOUNT = env_str("WORKBENCH_SLURM_ACCOUNT")  # sbatch --account; blank: the user's default
# Extra sbatch options for every job, e.g. "--time=2-00:00:00 --qos=normal".
SLURM_SBATCH_OPTIONS = env_str("WORKBENCH_SLURM_SBATCH_OPTIONS")
# Job names are <prefix>-run<id>-a<attempt>: the prefix tells this workbench's jobs apart from
# other jobs of the same account (another workbench, the user's own jobs).
SLURM_JOB_PREFIX = env_str("WORKBENCH_SLURM_JOB_PREFIX", "wb")
# The Python that runs the trainer on the compute nodes (the same venv path on shared storage).
SLURM_PYTHON = env_str("WORKBENCH_SLURM_PYTHON") or sys.executable
# CPUs asked per GPU (sbatch --cpus-per-task, for the data loaders); 0 leaves Slurm's default.
SLURM_CPUS_PER_GPU = env_int("WORKBENCH_SLURM_CPUS_PER_GPU", 0, minimum=0)
SLURM_POLL_SECONDS = env_float("WORKBENCH_SLURM_POLL_SECONDS", 2.0, minimum=0.2)
SLURM_COMMAND_TIMEOUT_SECONDS = env_float("WORKBENCH_SLURM_COMMAND_TIMEOUT_SECONDS", 20.0, minimum=1.0)
if SLURM_ENABLED and not SLURM_PARTITION:
    raise ImproperlyConfigured("WORKBENCH_SLURM=1 needs WORKBENCH_SLURM_PARTITION (the partition runs go to)")

RUN_MAX_ATTEMPTS = env_int("WORKBENCH_RUN_MAX_ATTEMPTS", 3, minimum=1)
# How often a running run's devices and trainer processes are sampled (`system` events).
SYSTEM_SAMPLE_SECONDS = env_float("WORKBENCH_SYSTEM_SAMPLE_SECONDS", 5.0, minimum=0.2)
# Abort and pause send SIGTERM (the trainer saves a checkpoint), then SIGKILL after this long.
RUN_STOP_GRACE_SECONDS = env_float("WORKBENCH_RUN_STOP_GRACE_SECONDS", 60.0, minimum=1.0)

if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("WORKBENCH_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("WORKBENCH_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"


def _not_a_health_answer(record) -> bool:
    """False for /healthz's 503: "not ready yet" is the answer it exists to give (the run command
    waits on it until the worker's first heartbeat; monitors poll it), not a server error, which
    Django would log as `ERROR ... Service Unavailable: /healthz` at every start."""
    request = getattr(record, "request", None)
    return not (getattr(record, "status_code", None) == 503 and getattr(request, "path", None) == "/healthz")


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"not_a_health_answer": {"()": "django.utils.log.CallbackFilter", "callback": _not_a_health_answer}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("WORKBENCH_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "django.request": {"filters": ["not_a_health_answer"]}},
}
