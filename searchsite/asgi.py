import os

import django

from searchsite.handler import SearchASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does
application = SearchASGIHandler()


def _warm_up() -> None:
    from retrieval.service import warm_up

    warm_up()


_warm_up()
