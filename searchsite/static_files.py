"""Static assets (the admin's CSS and JavaScript) straight from the installed apps."""

import mimetypes
from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest
from django.views.decorators.http import require_GET


@require_GET
def serve(request: HttpRequest, path: str) -> FileResponse:
    if ".." in Path(path).parts:
        raise Http404("no such asset")
    found = finders.find(path)
    if not found:
        raise Http404("no such asset")
    content_type, _ = mimetypes.guess_type(str(found))
    response = FileResponse(open(found, "rb"), content_type=content_type)  # noqa: SIM115
    response["Cache-Control"] = "public, max-age=3600"
    return response
