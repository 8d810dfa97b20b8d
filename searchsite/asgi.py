import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

# After setup: the handler's front door is the search service's, which reads the models.
from searchsite.handler import SearchASGIHandler  # noqa: E402

application = SearchASGIHandler()


def _warm_up() -> None:
    from retrieval.service import warm_up

    warm_up()


_warm_up()


def _record_rollups() -> None:
    # The ops page's history: this process's per-minute roll-ups (retrieval/rollup_writer.py).
    from retrieval.rollup_writer import start_in_this_process

    start_in_this_process()


_record_rollups()
