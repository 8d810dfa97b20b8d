"""Settings for the listings search site. Every value comes from the environment with a
safe default; `docs/configuration` in README.md lists them."""

import math
import secrets
from typing import Any

import django_stubs_ext
from psycopg.conninfo import conninfo_to_dict

from searchsite import embedded
from searchsite.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_optional,
    env_share,
    env_str,
)

# Django's generic classes (ModelAdmin[Listing]) can be subscripted at run time, as they
# are for mypy; before any admin module is imported.
django_stubs_ext.monkeypatch()

RUN_DIR = embedded.run_dir()


def _secret_key() -> str:
    """A key from the environment, or one generated once per installation (never in git)."""
    configured = env_optional("DJANGO_SECRET_KEY")
    if configured:
        return configured
    key_file = RUN_DIR / "secret_key"
    if not key_file.exists():
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])

# HTTPS, for a deployment behind TLS (README, "On real servers"). Off by default: `make run`
# serves plain HTTP on loopback, where a redirect to HTTPS or a secure-only cookie would
# lock its admin out.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
# Behind a proxy that terminates TLS and says so in X-Forwarded-Proto (and strips it from
# what clients send): only then may Django believe the header.
if env_bool("DJANGO_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Django finds its security, clickjacking and CSRF middleware by dotted path; this site
# runs subclasses of them (searchsite/middleware.py), which searchsite/checks.py checks for.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_prometheus",
    "axes",
    "searchsite",
    "ingestion",
    "retrieval",
    "evaluation",
    "ops",
]

# Django's and django-prometheus's own middleware, run on the event loop for async
# requests instead of one thread hop per hook (see searchsite/middleware.py).
MIDDLEWARE = [
    "searchsite.middleware.PrometheusBeforeMiddleware",
    "searchsite.middleware.SecurityMiddleware",
    "searchsite.content_security.content_security_policy",
    "searchsite.middleware.SessionMiddleware",
    "searchsite.middleware.CommonMiddleware",
    "searchsite.middleware.CsrfViewMiddleware",
    "searchsite.middleware.AuthenticationMiddleware",
    "searchsite.middleware.MessageMiddleware",
    "searchsite.middleware.XFrameOptionsMiddleware",
    "searchsite.middleware.PrometheusAfterMiddleware",
    # Inside the session's and the user's middleware, which it does not need: a change
    # leaves the primary's position in a cookie (retrieval/web/own_writes.py).
    "retrieval.web.own_writes.own_writes",
    # Last, as django-axes asks: it turns a lockout its backend flagged into the answer.
    "axes.middleware.AxesMiddleware",
]

# Admin logins are throttled (django-axes): AXES_FAILURE_LIMIT failures for one user name
# from one address lock that pair out for AXES_COOLOFF_TIME hours; a success resets them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_HOURS", 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True

ROOT_URLCONF = "searchsite.urls"
ASGI_APPLICATION = "searchsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

# Unset URLs mean the embedded servers under RUN_DIR (see searchsite/embedded).
DATABASE_URL = env_optional("DATABASE_URL") or embedded.default_database_url()
REDIS_URL = env_optional("REDIS_URL") or embedded.default_redis_url()


# What this process is (web, ingest-worker, embed-worker, beat: the supervisor and
# docker-compose.yml set it; manage for anything else), named in every connection's
# application_name so that ops can read pg_stat_activity.
PROCESS_ROLE = env_str("SEARCHSITE_ROLE", "manage")


# Any: Django's own type for a DATABASES entry, so a reader of it needs no cast.
# A web process's Django round trips (admin, editorial API, health, metrics) that Postgres
# leaves unanswered this long are broken off, and the request gets a 503 in plain words
# (searchsite/stalled_database.py); a connection attempt gives up after as long (libpq
# counts whole seconds, at least 2).
DATABASE_STALL_TIMEOUT_S = env_float("DATABASE_STALL_TIMEOUT_S", 5.0)


def _database(url: str) -> dict[str, Any]:
    params = conninfo_to_dict(url)
    params.setdefault("application_name", f"searchsite-{PROCESS_ROLE}")
    params.setdefault("connect_timeout", str(max(2, math.ceil(DATABASE_STALL_TIMEOUT_S))))
    return {
        "ENGINE": "searchsite.postgres_backend",
        "NAME": params.pop("dbname", "searchsite"),
        "USER": params.pop("user", ""),
        "PASSWORD": params.pop("password", ""),
        "HOST": params.pop("host", ""),
        "PORT": params.pop("port", ""),
        "CONN_MAX_AGE": env_int("DATABASE_CONN_MAX_AGE", 60),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": params,
    }


DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Sessions live in this cache. A stalled Redis held a request for redis-py's default 5 s;
# after this timeout a session that cannot be read is treated as none (Django's cache
# session backend does that on any error), and the request goes on as anonymous.
CACHE_SOCKET_TIMEOUT_S = env_float("CACHE_SOCKET_TIMEOUT_S", 0.5)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "searchsite",
        "OPTIONS": {
            "socket_timeout": CACHE_SOCKET_TIMEOUT_S,
            "socket_connect_timeout": CACHE_SOCKET_TIMEOUT_S,
        },
    }
}
SESSION_ENGINE = "django.contrib.sessions.backends.cache"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Assets are collected once per start (`manage.py bootstrap`, and the test session) into
# the run directory, each under a name carrying a hash of its content, and served from
# there by searchsite/static_files.py: a hashed name never changes content, so it is cached
# for good. No sync-only middleware (WhiteNoise's), which would run every async view in a
# thread where a client's disconnect could no longer cancel it.
STATIC_ROOT = RUN_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}

# Celery: Redis broker, one queue per kind of work (see searchsite/celery.py).
CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
WORKER_HEARTBEAT_INTERVAL_S = env_float("WORKER_HEARTBEAT_INTERVAL_S", 10.0)
WORKER_HEARTBEAT_MAX_AGE_S = env_float("WORKER_HEARTBEAT_MAX_AGE_S", 45.0)

# Embeddings
EMBED_BATCH_SIZE = env_int("EMBED_BATCH_SIZE", 128)
EMBED_TASK_SLICE_S = env_float("EMBED_TASK_SLICE_S", 30.0)
# Vector work yields to searches (ingestion/pacing.py). While searches arrive, the model runs
# in slices of EMBED_PACE_SLICE texts, a slice at a time as the floor allows: the floor is
# the listings a second that give every listing waiting its vector within EMBED_CATCH_UP_S
# of the oldest one's fetch (a 5,000-listing burst within 5 minutes at half the capacity
# limit, issue 35), at least EMBED_FLOOR_PER_S and at most EMBED_CATCH_UP_MOST_PER_S
# listings a second (a stream past that makes the vectors' lag grow, not the searches
# wait); while searches are quiet, at full speed. EMBED_BUSY_SHARE above 0 gives it
# up to that share of the time on top, halved while more than EMBED_SLOW_SHARE of the last
# second's searches took longer than SEARCH_PRESSURE_SLOW_MS (the vector budget) and grown
# back while none did: 0 by default, since that share's work moved the searches' p99 more
# than the floor's steady slices at the same rate (docs/decisions/vector-work-yields-to-
# searches.md); a deployment whose searches leave most of the CPU idle may want it.
EMBED_PACE_SLICE = env_int("EMBED_PACE_SLICE", 16)
EMBED_BUSY_SHARE = env_share("EMBED_BUSY_SHARE", 0.0, none=True)
EMBED_SLOW_SHARE = env_float("EMBED_SLOW_SHARE", 0.01)
EMBED_FLOOR_PER_S = env_float("EMBED_FLOOR_PER_S", 10.0)
EMBED_CATCH_UP_S = env_float("EMBED_CATCH_UP_S", 240.0)
EMBED_CATCH_UP_MOST_PER_S = env_float("EMBED_CATCH_UP_MOST_PER_S", 25.0)
# The model's slices run on a thread of Linux's SCHED_IDLE class, on cores searches leave
# idle; one not done there within EMBED_IDLE_PATIENCE_MS (every core busy) is done at the
# worker's own priority, so the floor holds (ingestion/idle_cores.py). While searches
# arrive they take at most EMBED_IDLE_SHARE of the time even there: idle cores are not
# free to the searches beside them (docs/decisions/the-models-share-runs-on-idle-cores.md).
EMBED_IDLE_CLASS = env_bool("EMBED_IDLE_CLASS", True)
EMBED_IDLE_PATIENCE_MS = env_int("EMBED_IDLE_PATIENCE_MS", 200)
EMBED_IDLE_SHARE = env_share("EMBED_IDLE_SHARE", 0.25)
# While searches arrive, a new sweep waits up to EMBED_GATHER_S before its first claim,
# taking the listings that arrived meanwhile with it: a trickle's vectors in a few larger
# sweeps, not one small sweep per poll (ingestion/pacing.py, gather).
EMBED_GATHER_S = env_float("EMBED_GATHER_S", 2.0)
SEARCH_PRESSURE_SLOW_MS = env_float("SEARCH_PRESSURE_SLOW_MS", 40.0)
# A payload's listings (a poll, an upload, the editorial API) are applied in chunks of
# INGEST_PACE_CHUNK drafts, in its one transaction, paced like the vectors but starting at
# INGEST_BUSY_SHARE, never slower than INGEST_FLOOR_PER_S (a 5,000-listing burst within
# 10 s). First values, as above.
INGEST_PACE_CHUNK = env_int("INGEST_PACE_CHUNK", 250)
INGEST_BUSY_SHARE = env_share("INGEST_BUSY_SHARE", 0.5)
INGEST_FLOOR_PER_S = env_float("INGEST_FLOOR_PER_S", 500.0)
# /healthz fails while a listing has waited longer than this for its embedding: twice the
# vector lag objective (p95 30 s, bench/ingest.py).
VECTOR_LAG_MAX_S = env_float("VECTOR_LAG_MAX_S", 60.0)
# A process asks Postgres for the embedding lag at most this often; scrapes and health
# checks in between get the last answer, its oldest wait aged by the time since.
EMBEDDING_LAG_REFRESH_S = env_float("EMBEDDING_LAG_REFRESH_S", 5.0)

# Fetching sources: every fetch is bounded in time and size.
FETCH_CONNECT_TIMEOUT_S = env_float("FETCH_CONNECT_TIMEOUT_S", 5.0)
FETCH_READ_TIMEOUT_S = env_float("FETCH_READ_TIMEOUT_S", 10.0)
FETCH_TOTAL_TIMEOUT_S = env_float("FETCH_TOTAL_TIMEOUT_S", 30.0)
FETCH_SLOW_S = env_float("FETCH_SLOW_S", 10.0)
FETCH_MAX_BYTES = env_int("FETCH_MAX_BYTES", 10 * 1024 * 1024)
# Off by default: a source URL must not reach the database, Redis or cloud metadata.
FETCH_ALLOW_PRIVATE_ADDRESSES = env_bool("FETCH_ALLOW_PRIVATE_ADDRESSES", False)

# Per-source circuit breaker.
SOURCE_BREAKER_WINDOW_S = env_float("SOURCE_BREAKER_WINDOW_S", 3600.0)
SOURCE_BREAKER_MIN_CALLS = env_int("SOURCE_BREAKER_MIN_CALLS", 3)
SOURCE_BREAKER_FAILURE_RATIO = env_float("SOURCE_BREAKER_FAILURE_RATIO", 0.6)
SOURCE_BREAKER_COOLDOWN_S = env_float("SOURCE_BREAKER_COOLDOWN_S", 600.0)

# Calendars: recurrences are expanded within this window around now.
CALENDAR_WINDOW_PAST_DAYS = env_int("CALENDAR_WINDOW_PAST_DAYS", 1)
CALENDAR_WINDOW_FUTURE_DAYS = env_int("CALENDAR_WINDOW_FUTURE_DAYS", 365)
CALENDAR_MAX_OCCURRENCES_PER_EVENT = env_int("CALENDAR_MAX_OCCURRENCES_PER_EVENT", 500)

# De-duplication of the same event from different sources.
DEDUP_START_TOLERANCE_MIN = env_int("DEDUP_START_TOLERANCE_MIN", 30)
DEDUP_TITLE_SIMILARITY = env_float("DEDUP_TITLE_SIMILARITY", 0.5)
DEDUP_VENUE_SIMILARITY = env_float("DEDUP_VENUE_SIMILARITY", 0.3)

# Search: one deadline per request (the latency objective), a reserve for fusion and
# serialisation, and a smaller budget for the vector stage (query embedding + ANN search).
# Invariants are Django system checks (retrieval/bounds/checks.py).
SEARCH_DEADLINE_MS = env_float("SEARCH_DEADLINE_MS", 150.0)
SEARCH_CALLER_TIMEOUT_CAP_MS = env_float("SEARCH_CALLER_TIMEOUT_CAP_MS", 1000.0)
SEARCH_RESERVE_MS = env_float("SEARCH_RESERVE_MS", 15.0)
# 40, not 60: the budget sweep's rule holds at 40 ms with and without a 20 listings/s
# ingest stream at concurrency 8, and at 30 ms without it (docs/quality.md).
SEARCH_VECTOR_BUDGET_MS = env_float("SEARCH_VECTOR_BUDGET_MS", 40.0)
SEARCH_MIN_VECTOR_BUDGET_MS = env_float("SEARCH_MIN_VECTOR_BUDGET_MS", 5.0)
# The share of searches whose vector stage is watched on past its budget (up to the
# stages' deadline, the answer still cut at the budget), so that the what-if of a looser
# budget knows what the cut stages would have taken (ops/whatif.py).
SEARCH_WHATIF_SAMPLE = env_float("SEARCH_WHATIF_SAMPLE", 0.01)
# The share of answers that may be fallbacks or 503s (the alert's objective too,
# deploy/prometheus/rules.yml). A budget canary (ops/canary.py) is rolled back by itself
# when, in every minute of the last CANARY_WINDOW_MINUTES that had searches of its arm,
# its fallback share or its share slower than the latency objective (its p99 over it) was
# over, and the window held at least CANARY_LEAST_ANSWERS of them.
SEARCH_FALLBACK_OBJECTIVE = env_float("SEARCH_FALLBACK_OBJECTIVE", 0.10)
CANARY_WINDOW_MINUTES = env_int("CANARY_WINDOW_MINUTES", 5)
CANARY_LEAST_ANSWERS = env_float("CANARY_LEAST_ANSWERS", 50)
# The budgets are looked at again (ops/review.py) when the active generation changes, or
# the listings, the replicas or the capacity limit the deployment declares
# (SEARCH_CAPACITY_PER_S, from bench/capacity.py; unset: not compared) move by more than
# this fraction since they were chosen.
SEARCH_REVIEW_FRACTION = env_float("SEARCH_REVIEW_FRACTION", 0.25)
SEARCH_CAPACITY_PER_S = env_float("SEARCH_CAPACITY_PER_S", 0.0) or None
# How long the clean-up of a statement abandoned at its deadline may take behind the
# response (the cancel request, the server's answer, the connection's return) before its
# connection is closed instead: a live server answers a cancel in a millisecond or two, a
# frozen one never (retrieval/pg/statement.py).
SEARCH_CLEANUP_BOUND_MS = env_float("SEARCH_CLEANUP_BOUND_MS", 1000.0)
# 80, not 40: CACM dev's vector recall@10 0.270 -> 0.302, the others unchanged, for a
# statement bounded by it (docs/quality.md). A graph of 1,000,000 listings needs 400 for
# recall@10 0.95 (800 if built with ef_construction 200; docs/benchmarks.md): set it with
# the corpus.
SEARCH_HNSW_EF_SEARCH = env_int("SEARCH_HNSW_EF_SEARCH", 80)
# How each generation's HNSW index is built. ef_construction 400 against 200: recall@10
# at ef_search 80 0.930 -> 0.984 at 100,000 listings and 0.692 -> 0.786 at 1,000,000, at
# the same search's cost, for a build twice as long
# (docs/decisions/hnsw-graphs-built-with-ef-construction-400.md). m 32 found no more of
# the true neighbours at 1,000,000 listings (docs/decisions/hnsw-graph-keeps-m-16.md).
SEARCH_HNSW_M = env_int("SEARCH_HNSW_M", 16)
SEARCH_HNSW_EF_CONSTRUCTION = env_int("SEARCH_HNSW_EF_CONSTRUCTION", 400)
# What a new generation's HNSW index holds: the vectors in half precision, an index of 57 %
# of the size with the same recall and a faster search at 100,000 and 1,000,000 listings
# (docs/decisions/hnsw-indexes-hold-half-precision.md). A generation keeps the type it was
# built with.
SEARCH_VECTOR_TYPE = env_choice("SEARCH_VECTOR_TYPE", "halfvec", ("halfvec", "vector"))
# Parallel workers beside the backend that builds a copied generation's index while
# searches run (ingestion/generations.py's copy_build): none, so the build takes one core.
GENERATION_BUILD_PARALLEL_WORKERS = env_int("GENERATION_BUILD_PARALLEL_WORKERS", 0)
SEARCH_MAX_QUERY_CHARS = env_int("SEARCH_MAX_QUERY_CHARS", 200)
# Suggestions as a visitor types (GET /api/suggest, retrieval/pg/suggestions.py): a deadline
# of their own, far under a search's (a keystroke's answer is stale by the next one), how
# many, and the longest text suggested for. How often the suggested texts are read afresh,
# SEARCH_SUGGEST_REFRESH_S, is beat's (searchsite/celery.py).
SEARCH_SUGGEST_DEADLINE_MS = env_float("SEARCH_SUGGEST_DEADLINE_MS", 30.0)
# Beat refreshes the suggestions and the lexical stage's vocabulary only when a listing
# changed since their last refresh, or once they are this old (retrieval/pg/views.py): a
# suggested text's count of listings still counts those that ended since.
SEARCH_VIEWS_MAX_AGE_S = env_float("SEARCH_VIEWS_MAX_AGE_S", 3600.0)
# Counts on the filters (retrieval/pg/facets.py): their own budget, within the search's
# deadline and never past its results; the longest wait for an idle pooled connection;
# how long counts are kept for the same filters.
SEARCH_FACETS_BUDGET_MS = env_float("SEARCH_FACETS_BUDGET_MS", 25.0)
SEARCH_FACETS_POOL_WAIT_MS = env_float("SEARCH_FACETS_POOL_WAIT_MS", 1.0)
SEARCH_FACETS_TTL_S = env_float("SEARCH_FACETS_TTL_S", 30.0)
SEARCH_SUGGEST_LIMIT = env_int("SEARCH_SUGGEST_LIMIT", 8)
SEARCH_SUGGEST_MAX_CHARS = env_int("SEARCH_SUGGEST_MAX_CHARS", 100)
# Request bodies Django reads into memory: above the editorial API's own 5 MB cap
# (ingestion/api.py), so a body under that cap reaches the API and a larger one gets its
# JSON 413, not Django's HTML 400 at the default 2.5 MB.
DATA_UPLOAD_MAX_MEMORY_SIZE = 6 * 1024 * 1024
SEARCH_MAX_K = env_int("SEARCH_MAX_K", 50)
# Pages of k results a search may ask for: each is a slice of the one fused ranking, which
# holds up to 2 x CANDIDATES_PER_RESULT x k listings (retrieval/hybrid.py).
SEARCH_MAX_PAGE = env_int("SEARCH_MAX_PAGE", 10)
# Who may read /metrics (searchsite/metrics_view.py): these networks, or a bearer of the
# token. Behind a proxy on the same host every request comes from loopback: then name the
# proxy's scrapers' network, or none, and give Prometheus the token.
METRICS_ALLOWED_NETWORKS = env_networks("METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
METRICS_BEARER_TOKEN = env_optional("METRICS_BEARER_TOKEN")
SEARCH_MAX_VECTOR_IN_FLIGHT = env_int("SEARCH_MAX_VECTOR_IN_FLIGHT", 8)
# Search requests one web process serves at once; past it the door answers 503 at once
# (retrieval/bounds/door.py). No run has compared it with other values yet
# (docs/reliability.md, "Overload").
SEARCH_MAX_IN_FLIGHT = env_int("SEARCH_MAX_IN_FLIGHT", 16)
# A proxy in front that stamps X-Request-Start (and strips the clients' own): only then
# may a search's deadline count from the proxy's receipt (retrieval/bounds/arrival.py).
SEARCH_TRUST_X_REQUEST_START = env_bool("SEARCH_TRUST_X_REQUEST_START", False)
# Search connections per pool, at most; a web process opens them all before it takes
# traffic and keeps them (retrieval/pg/pool.py, fill_pool): as many as the searches the door
# admits can hold at once (a lexical stage each, and the vector stages the vector limit
# admits), so the pool is never a second, hidden queue.
SEARCH_POOL_SIZE = env_int("SEARCH_POOL_SIZE", SEARCH_MAX_IN_FLIGHT + SEARCH_MAX_VECTOR_IN_FLIGHT)
SEARCH_CACHE_TTL_S = env_int("SEARCH_CACHE_TTL_S", 24 * 3600)
# A process writes a key it cached less than this long ago again only after it.
SEARCH_CACHE_REWRITE_S = env_float("SEARCH_CACHE_REWRITE_S", 60.0)
SEARCH_WARMING_BUDGET_MS = env_float("SEARCH_WARMING_BUDGET_MS", 5000.0)
# The most warming tasks a web process schedules a second (at once: one second's worth;
# 0: none); the timeouts past it are not warmed (retrieval/warming/schedule.py says why).
SEARCH_WARMING_PER_S = env_float("SEARCH_WARMING_PER_S", 5.0)
# The recall guardrail (evaluation/guardrail.py): how many judged queries a run, and which
# evaluation set (blank: the latest imported). How often: EVALUATION_GUARDRAIL_INTERVAL_S,
# read by searchsite/celery.py's beat schedule (default 900 s).
EVALUATION_GUARDRAIL_QUERIES = env_int("EVALUATION_GUARDRAIL_QUERIES", 20)
EVALUATION_GUARDRAIL_SET = env_str("EVALUATION_GUARDRAIL_SET", "")
VECTOR_BREAKER_WINDOW_S = env_float("VECTOR_BREAKER_WINDOW_S", 30.0)
VECTOR_BREAKER_MIN_CALLS = env_int("VECTOR_BREAKER_MIN_CALLS", 10)
VECTOR_BREAKER_FAILURE_RATIO = env_float("VECTOR_BREAKER_FAILURE_RATIO", 0.5)
VECTOR_BREAKER_COOLDOWN_S = env_float("VECTOR_BREAKER_COOLDOWN_S", 5.0)
# Streaming replicas searches read from: comma-separated URLs, whose database is the
# primary's whatever a URL names; by default those `SEARCH_REPLICAS=N make run` started.
# A search reads the primary instead (retrieval/pg/replicas.py) when every replica is
# further behind than SEARCH_REPLICA_MAX_LAG_S as its last check saw it (one every
# SEARCH_REPLICA_CHECK_S, waited for at most SEARCH_REPLICA_CHECK_TIMEOUT_MS) or cut off
# by its breaker (REPLICA_BREAKER_*, per process); and a statement a replica has not
# answered within SEARCH_REPLICA_PATIENCE_MS runs on the primary, by the same deadline.
SEARCH_REPLICA_URLS = env_optional("SEARCH_REPLICA_URLS") or (
    "" if env_optional("DATABASE_URL") else embedded.default_replica_urls()
)
SEARCH_REPLICA_MAX_LAG_S = env_float("SEARCH_REPLICA_MAX_LAG_S", 1.0)
SEARCH_REPLICA_CHECK_S = env_float("SEARCH_REPLICA_CHECK_S", 0.5)
SEARCH_REPLICA_CHECK_TIMEOUT_MS = env_float("SEARCH_REPLICA_CHECK_TIMEOUT_MS", 100.0)
SEARCH_REPLICA_PATIENCE_MS = env_float("SEARCH_REPLICA_PATIENCE_MS", 50.0)
REPLICA_BREAKER_WINDOW_S = env_float("REPLICA_BREAKER_WINDOW_S", 10.0)
REPLICA_BREAKER_MIN_CALLS = env_int("REPLICA_BREAKER_MIN_CALLS", 5)
REPLICA_BREAKER_FAILURE_RATIO = env_float("REPLICA_BREAKER_FAILURE_RATIO", 0.5)
REPLICA_BREAKER_COOLDOWN_S = env_float("REPLICA_BREAKER_COOLDOWN_S", 2.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
