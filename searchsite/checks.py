"""Deployment checks Django's own cannot make here. Django's security checks look for its
middleware by dotted path, and this site runs subclasses of them on the event loop
(searchsite/middleware.py): W001-W003 (the middleware missing) are silenced
(settings.SILENCED_SYSTEM_CHECKS) and replaced by a check that accepts a subclass, and the
checks Django then skips without a word (HSTS, the HTTPS redirect, the CSRF cookie) are
made here. So is one of the task queue's settings that only a deployment can get wrong."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.module_loading import import_string

REQUIRED = {
    "searchsite.W001": SecurityMiddleware,
    "searchsite.W002": XFrameOptionsMiddleware,
    "searchsite.W003": CsrfViewMiddleware,
}


@register(deploy=True)
def check_security_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    installed = [import_string(path) for path in settings.MIDDLEWARE]
    return [
        Warning(
            f"no {stock.__module__}.{stock.__name__} (nor a subclass) in MIDDLEWARE",
            hint="its protection is off: put it, or the site's subclass, back",
            id=check_id,
        )
        for check_id, stock in REQUIRED.items()
        if not any(isinstance(entry, type) and issubclass(entry, stock) for entry in installed)
    ]


@register(deploy=True)
def check_https(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    unset = {
        "searchsite.W004": (
            not settings.SECURE_HSTS_SECONDS,
            "SECURE_HSTS_SECONDS is not set (DJANGO_SECURE_HSTS_SECONDS)",
        ),
        "searchsite.W008": (
            not settings.SECURE_SSL_REDIRECT,
            "SECURE_SSL_REDIRECT is off (DJANGO_SECURE_SSL_REDIRECT)",
        ),
        "searchsite.W016": (
            not settings.CSRF_COOKIE_SECURE,
            "CSRF_COOKIE_SECURE is off (DJANGO_SECURE_COOKIES)",
        ),
    }
    return [
        Warning(message, hint="behind HTTPS, set it: README, 'On real servers'", id=check_id)
        for check_id, (missing, message) in unset.items()
        if missing
    ]


@register()
def check_visibility_timeout(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A task still running when its visibility timeout passes is handed to a second
    worker: the timeout must outlast the hard time limit, which ends every task."""
    from searchsite.celery import app

    timeout = app.conf.broker_transport_options["visibility_timeout"]
    if timeout > app.conf.task_time_limit:
        return []
    return [
        Error(
            f"CELERY_VISIBILITY_TIMEOUT_S ({timeout:g}) is not above CELERY_TASK_TIME_LIMIT_S"
            f" ({app.conf.task_time_limit:g})",
            hint="a task still running would be taken by a second worker: raise the first",
            id="searchsite.E001",
        )
    ]
