import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")

application = get_asgi_application()


def _warm_up() -> None:
    from retrieval.service import warm_up

    warm_up()


_warm_up()
