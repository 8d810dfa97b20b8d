import gc
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

# A web process's Django round trips are bounded: a frozen Postgres held admin and health
# requests as long as it was frozen (searchsite/stalled_database.py).
from searchsite.stalled_database import enable  # noqa: E402

enable()

# After setup: the handler's front door is the search service's, which reads the models.
from searchsite.handler import SearchASGIHandler  # noqa: E402

application = SearchASGIHandler()


def _load_query_model() -> None:
    from retrieval.warming.warm_up import load_query_model

    load_query_model()


_load_query_model()


def _freeze_the_loaded_heap() -> None:
    # What is loaded by now (Django, the URLconf's modules, the query model's session)
    # lives as long as the process: out of the collector's reach, a full collection no
    # longer walks it. Walked, it stopped this process's event loop, and with it every
    # search in flight, for up to 217 ms at a time (8 full collections in a 3-minute load
    # run, 0.9 s in all; docs/reliability.md), past the 40 ms vector budget each time.
    gc.collect()
    gc.freeze()


_freeze_the_loaded_heap()


def _record_rollups() -> None:
    # The ops page's history: this process's per-minute roll-ups (ops/rollup_writer.py).
    from ops.rollup_writer import start_in_this_process

    start_in_this_process()


_record_rollups()


def _publish_search_pressure() -> None:
    # Background work yields to this process's searches (ingestion/pacing.py).
    from retrieval.bounds.activity import start_publishing

    start_publishing()


_publish_search_pressure()
