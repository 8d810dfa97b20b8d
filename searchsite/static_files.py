"""Static assets (the admin's CSS and JavaScript) straight from the installed apps, by
Django's own staticfiles view: without WhiteNoise (see docs/architecture.md) nothing else
serves them, so `insecure=True` is how this site means it, not a debug shortcut."""

from pathlib import Path

from django.contrib.staticfiles import views
from django.http import Http404, HttpRequest, HttpResponseBase
from django.views.decorators.http import require_GET


@require_GET
def serve(request: HttpRequest, path: str) -> HttpResponseBase:
    if ".." in Path(path).parts:
        raise Http404("no such asset")
    response = views.serve(request, path, insecure=True)
    response["Cache-Control"] = "public, max-age=3600"
    return response
