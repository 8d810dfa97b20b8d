"""What a request whose database stopped answering gets: a 503 that says so in plain
words, with Retry-After, instead of Django's 500 page for an unhandled error. A search's
own statements never get here (the search answers by its deadline, retrieval/web/api.py);
the admin's, the editorial API's and the health checks' do, once their round trip is
broken off (searchsite/stalled_database.py) or their connection attempt gives up."""

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error

RETRY_AFTER_S = 5
MESSAGE = (
    "The database is not answering just now, so this request could not be completed."
    " Please try again in a few seconds."
)


def handler500(request: HttpRequest) -> HttpResponse:
    """Django calls it from inside the `except` of the unhandled error."""
    if not isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        return server_error(request)
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": MESSAGE}, status=503)
    else:
        response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
