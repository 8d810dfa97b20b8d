"""Static assets (the search page's and the admin's), from STATIC_ROOT as collectstatic left
them: each under its original name and under a name carrying a hash of its content
(ManifestStaticFilesStorage), which is what `{% static %}` writes into pages. A hashed name
never changes content, so browsers may keep it for a year without asking again; an
original name may, so it is cached for an hour. Without WhiteNoise (see
docs/decisions/search-requests-stay-on-the-event-loop.md) nothing else serves them."""

from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage
from django.http import Http404, HttpRequest, HttpResponseBase
from django.views import static
from django.views.decorators.http import require_GET

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATED = "public, max-age=3600"


@require_GET
def serve(request: HttpRequest, path: str) -> HttpResponseBase:
    if ".." in Path(path).parts:
        raise Http404("no such asset")
    response = static.serve(request, path, document_root=str(settings.STATIC_ROOT))
    response["Cache-Control"] = IMMUTABLE if _hashed(path) else REVALIDATED
    return response


def _hashed(path: str) -> bool:
    # The manifest's names, as collectstatic left them (it updates this storage's own map).
    storage = staticfiles_storage
    return isinstance(storage, ManifestFilesMixin) and path in storage.hashed_files.values()
