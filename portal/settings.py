"""Tollgate settings: one file, driven by environment variables.

With TOLLGATE_DEMO=1 and nothing else set it runs the demo: SQLite in var/, kombu's filesystem
broker in var/broker, a file cache for live progress, a SECRET_KEY generated into var/secret_key.
Set DATABASE_URL and CELERY_BROKER_URL (redis://) for production. Secrets fail closed: outside
demo mode SECRET_KEY and TOLLGATE_SECRET_KEYS must be set (or kept in TOLLGATE_SECRETS_DIR).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal.lib.demo.broker import folder_options as broker_folder_options
from portal.lib.security import secrets as secretlib
from portal.settings_env import envbool, envint, envlist

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TOLLGATE_VAR_DIR", BASE_DIR / "var"))
# SQLite file, filesystem broker and file cache of the demo live here.
(VAR_DIR / "broker" / "processed").mkdir(parents=True, exist_ok=True)


def secret_file(path: Path, make: Callable[[], str]) -> str:
    """The secret kept in ``path``, generated there (0600) on first start; see
    portal/lib/security/secrets.py."""
    try:
        return secretlib.read_or_create(path, make)
    except (OSError, ValueError) as exc:
        raise ImproperlyConfigured(f"cannot read or create the secret file {path}: {exc}") from None


DEBUG = envbool("DEBUG", "false")
# Demo and test mode (set by `make demo` / `make test`, by tests/demo_mode.py for pytest): the only
# mode in which the secrets below may be generated into var/ or derived instead of configured.
TOLLGATE_DEMO = envbool("TOLLGATE_DEMO", "false")
# A private directory (a volume in docker-compose.yml) where missing secrets are generated on first
# start and kept: `secret_key` and `fernet_keys` (one Fernet key per line, newest first).
TOLLGATE_SECRETS_DIR = os.environ.get("TOLLGATE_SECRETS_DIR", "").strip()

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY.strip():
    if TOLLGATE_SECRETS_DIR:
        SECRET_KEY = secret_file(Path(TOLLGATE_SECRETS_DIR) / "secret_key", secretlib.generate_secret_key)
    elif TOLLGATE_DEMO:
        SECRET_KEY = secret_file(VAR_DIR / "secret_key", secretlib.generate_secret_key)
    else:
        raise ImproperlyConfigured(
            'SECRET_KEY is not set: set it to a long random string (python -c "import secrets; '
            'print(secrets.token_urlsafe(50))"), or set TOLLGATE_SECRETS_DIR to a private directory '
            "where Tollgate generates and keeps its secrets (TOLLGATE_DEMO=1 is for the demo and tests only)"
        )

# Fernet keys for secrets at rest (auth, headers, SSH keys), newest first; see portal/vault.py.
TOLLGATE_SECRET_KEYS = envlist("TOLLGATE_SECRET_KEYS", "")
_keys_source = "TOLLGATE_SECRET_KEYS"
if not TOLLGATE_SECRET_KEYS:
    if TOLLGATE_SECRETS_DIR:
        _keys_source = str(Path(TOLLGATE_SECRETS_DIR) / "fernet_keys")
        TOLLGATE_SECRET_KEYS = (
            secret_file(Path(_keys_source), secretlib.generate_key).replace(",", " ").split()
        )
    elif TOLLGATE_DEMO:
        TOLLGATE_SECRET_KEYS = [secretlib.derive_key(SECRET_KEY)]
    else:
        raise ImproperlyConfigured(
            "TOLLGATE_SECRET_KEYS is not set: it holds the Fernet keys that encrypt stored credentials "
            "and SSH keys (comma-separated, newest first); generate one with: "
            f"{secretlib.KEY_HELP} (or set TOLLGATE_SECRETS_DIR to have one generated and kept there)"
        )
try:
    secretlib.Vault(TOLLGATE_SECRET_KEYS)
except secretlib.InvalidKeyError as exc:
    raise ImproperlyConfigured(f"{_keys_source}: {exc}") from None

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "csp",
    "rest_framework",
    "drf_spectacular",
    # Schedules live in its tables; the beat reads them with its DatabaseScheduler.
    "django_celery_beat",
    "portal.audit",
    "portal.projects",
    "portal.targets",
    "portal.runs",
    "portal.scenarios",
    "portal.signing",
    "portal.sharing",
    "portal.api",
    "portal.hooks",
    "portal.ops",
    "portal.schedules",
    "portal.judgements",
    "portal.alerts",
    "portal.console",  # the `tollgate` command and the demo: imports every app above, none imports it
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.headers.PermissionsPolicyMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# HTTPS: TOLLGATE_HTTPS=1 when users reach the portal over https:// (directly or through a proxy).
TOLLGATE_HTTPS = envbool("TOLLGATE_HTTPS", "false")
SECURE_SSL_REDIRECT = TOLLGATE_HTTPS
# Load balancers, docker-compose and Prometheus ask over plain HTTP inside the network (portal/ops).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = TOLLGATE_HTTPS
CSRF_COOKIE_SECURE = TOLLGATE_HTTPS
SECURE_HSTS_SECONDS = 31536000 if TOLLGATE_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = TOLLGATE_HTTPS
SECURE_HSTS_PRELOAD = TOLLGATE_HTTPS
# Behind a proxy that terminates TLS and sets X-Forwarded-Proto (overwriting what clients send):
# without this, every request looks like plain HTTP and SECURE_SSL_REDIRECT loops.
if envbool("TOLLGATE_PROXY_SSL_HEADER", "false"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
# Sessions are read from the cache (Redis in production) and written through to the database: every
# logged-in page read skips one query (docs/performance.md, "The portal under its own load").
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): no inline script or style anywhere, so no 'unsafe-inline'.
# Page data reaches the scripts through {{ …|json_script }} (JSON, never executed).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    }
}
# Sent by portal/headers.py: the portal needs no camera, microphone, location, payment or USB.
TOLLGATE_PERMISSIONS_POLICY = (
    "camera=(), microphone=(), geolocation=(), payment=(), usb=(), interest-cohort=()"
)

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
                "portal.accounts.signup_context",
                "portal.projects.context_processors.projects",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'tollgate.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The demo's web and worker processes share one file; wait for locks instead of failing.
    # IMMEDIATE: a transaction takes the write lock when it begins, so one that reads and then writes
    # (a webhook delivery deciding replay and idempotency, then starting a run) waits its turn; with
    # SQLite's default (deferred) the second of two such transactions fails at once with "database is
    # locked" — no timeout helps — and concurrent deliveries answered 500.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif envbool("TOLLGATE_PREPARED_STATEMENTS", "true"):
    # PostgreSQL: parameters bound on the server, and a query run twice on a connection is prepared
    # (parsed and planned once per connection, not on every request): the pages read all day send
    # the same few queries. Set 0 behind a pooler that shares server connections between clients per
    # transaction without tracking prepared statements (PgBouncer before 1.21): docs/performance.md.
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 2}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The test suite only (tests/demo_mode.py sets it, in demo mode only): passwords hashed with one
# cheap round instead of PBKDF2's million (0.3 CPU-s each, hundreds of accounts per run). Existing
# PBKDF2 hashes still verify. Ignored outside demo mode, which production refuses.
if TOLLGATE_DEMO and envbool("TOLLGATE_TEST_FAST_PASSWORD_HASHES", "false"):
    PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/runs/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Accounts: django-allauth (portal/accounts.py holds the adapter). Log in by username or e-mail.
# portal.accounts.ModelBackend is Django's with a cheaper load of the signed-in user; a session
# signed in before it names Django's, listed last so that it stays signed in.
AUTHENTICATION_BACKENDS = [
    "portal.accounts.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
    "django.contrib.auth.backends.ModelBackend",
]
ACCOUNT_ADAPTER = "portal.accounts.AccountAdapter"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_UNIQUE_EMAIL = True
# Sign-up is an operator's switch: open in the demo, closed in production unless TOLLGATE_SIGNUP=1.
TOLLGATE_SIGNUP = envbool("TOLLGATE_SIGNUP", "true" if TOLLGATE_DEMO else "false")
# "mandatory": no login before the address is confirmed; "optional": a confirmation mail is sent.
ACCOUNT_EMAIL_VERIFICATION = os.environ.get(
    "TOLLGATE_EMAIL_VERIFICATION", "optional" if TOLLGATE_DEMO else "mandatory"
).strip()
if ACCOUNT_EMAIL_VERIFICATION not in ("mandatory", "optional", "none"):
    raise ImproperlyConfigured(
        f"TOLLGATE_EMAIL_VERIFICATION must be mandatory, optional or none, got {ACCOUNT_EMAIL_VERIFICATION!r}"
    )
# Sign-up must not tell whether an address is registered. With mandatory verification allauth mails
# the address's owner instead (the answer is the same, no account is made); without it a sign-up logs
# in at once, so the only same answer is a new account whose address stays unverified ("strict"; a
# verified address is never taken twice). Two accounts may then share an address: the lock-out
# counts a login at it against each (portal/accounts.py). Password resets answer the same either way.
ACCOUNT_PREVENT_ENUMERATION = "strict"
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = False
ACCOUNT_PASSWORD_INPUT_RENDER_VALUE = False
ACCOUNT_SESSION_REMEMBER = None
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[Tollgate] "
# Rate limits, counted in the cache (Redis in production, shared by every web process): after 5
# failed logins for one account (portal/accounts.py: by username or any of its e-mail addresses, in
# any case; a login at an address several accounts share counts against each) in 5 minutes even the
# right password is refused until the window passes; 10 failures a minute from one address; resets
# are limited per address and mailbox. The admin's login is this one (portal/urls.py).
ACCOUNT_RATE_LIMITS = {
    "login": "30/m/ip",
    "login_failed": "10/m/ip,5/5m/key",
    "reset_password": "20/m/ip,5/m/key",
    "reset_password_from_key": "20/m/ip",
    "signup": "20/m/ip",
    "change_password": "5/m/user",
    "reauthenticate": "10/m/user",
}
# The client address for rate limits and the audit log: REMOTE_ADDR, or behind N trusted proxies
# the N-th address from the right of X-Forwarded-For.
ALLAUTH_TRUSTED_PROXY_COUNT = envint("TOLLGATE_TRUSTED_PROXY_COUNT", "0")
# Second factor: TOTP (authenticator apps) with recovery codes; WebAuthn is not enabled.
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = os.environ.get("TOLLGATE_MFA_ISSUER", "Tollgate")

# E-mail (password reset, address confirmation): printed to the console in the demo, SMTP otherwise.
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "tollgate@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if TOLLGATE_DEMO and not EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
else:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = EMAIL_HOST or "localhost"
    EMAIL_PORT = envint("EMAIL_PORT", "587")
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "true")
    EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", "false")
    EMAIL_TIMEOUT = 20

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# Chart.js lives in static/vendor/, filled from node_modules by `npm ci` (postinstall).
WHITENOISE_USE_FINDERS = True

# Celery: kombu's filesystem transport needs no server (demo); redis:// in production.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem"):
    # kombu's filesystem transport with each message written whole before a consumer can take it
    # (workers/broker_fs.py: kombu's own let a worker read a half-written one and die).
    CELERY_BROKER_TRANSPORT = "workers.broker_fs:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = broker_folder_options(VAR_DIR / "broker")
else:
    # acks_late: the broker must not redeliver a run while it is still being measured.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": envint("TOLLGATE_VISIBILITY_TIMEOUT_S", "43200")}

# Live progress lives in the cache: Redis when there is one, files otherwise (shared by the
# demo's web and worker processes).
REDIS_URL = os.environ.get("REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else "")
if REDIS_URL:
    CACHES = {
        "default": {
            # Django's RedisCache, except that a Redis outage makes reads miss and writes no-ops
            # instead of errors (portal/cache.py).
            "BACKEND": "portal.cache.TolerantRedisCache",
            "LOCATION": REDIS_URL,
            # A Redis that hangs must not hang a request or a run's driver: portal/runs/live.py then
            # goes on without the cache (docs/reliability.md).
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 5},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }
# Rendered pages (portal/runs/pages.py): in each web process's memory, the 64 most recent.
PAGES_CACHE = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tollgate-pages"}
CACHES["pages"] = PAGES_CACHE | {"TIMEOUT": None, "OPTIONS": {"MAX_ENTRIES": 64}}

# Logs: plain text, or one JSON object per line with TOLLGATE_LOG_FORMAT=json (python-json-logger):
# {"time", "level", "logger", "message", "process", "thread"}, plus "exc_info" for an exception.
TOLLGATE_LOG_FORMAT = os.environ.get("TOLLGATE_LOG_FORMAT", "text").strip().lower() or "text"
if TOLLGATE_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"TOLLGATE_LOG_FORMAT must be text or json, got {TOLLGATE_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(process)d %(thread)d",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            "datefmt": "%Y-%m-%dT%H:%M:%S%z",
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"}
        | ({"formatter": "json"} if TOLLGATE_LOG_FORMAT == "json" else {}),
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
# Celery workers keep these handlers (JSON lines too) instead of installing their own text format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = TOLLGATE_LOG_FORMAT != "json"

# The JSON API (portal.api): Django REST framework, schema by drf-spectacular.
# The JSON API (portal/api, docs/api.md): bearer tokens only — no session, so no CSRF and a browser's
# cookies never act on it; JSON in and out; one error shape ({"status", "errors", "detail"}).
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": ["portal.api.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["portal.api.authentication.TokenScope"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "portal.api.errors.handle",
    # OPTIONS would describe the output serializers as if they were inputs: the schema does that.
    "DEFAULT_METADATA_CLASS": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tollgate API",
    "DESCRIPTION": "What does turning on TLS cost us? Runs, reports, share links. "
    "Authenticate with `Authorization: Bearer <token>`; see docs/api.md.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs page are public (they describe the API, they hold no data).
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"RunStatusEnum": "portal.runs.models.Run.Status"},
}

# What Tollgate itself lets users ask for and reach: quotas, the outbound policy, links, webhooks.
from portal.settings_product import *  # noqa: E402, F403
