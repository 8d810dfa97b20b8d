"""The help-center search page: progressive, in one streamed response.

The lexical stage usually answers well before the vector stage's budget ends, so the page
shows its listings first and the final ranking when the search is done:

- the search runs as for the API (`search.search`); `hybrid_search`'s `on_lexical` hands
  over the lexical candidates, which are read (hydrated) at once, beside the vector stage;
- whichever comes first decides the response. The final answer first (the usual case when
  the vector stage is quick, and every error): one plain page, with its own status (400,
  503 and 504 with Retry-After). The preview first: a 200 streamed in two chunks, the page
  up to the preview's listings now, the final listings and the page's end when the search
  is done. The stylesheet hides a preview once final results follow it (`:has()`), so the
  replacement needs no JavaScript; search.js only announces it and keeps a preview the
  user has focused until they leave it.

Invariants: the page never shows a result the search did not produce (the preview is the
lexical stage's own candidates, hydrated as every response is); the preview never delays
the search (it is read beside it, and given up when the final answer is in hand first);
when the request goes away, the search and the preview are cancelled, their SQL with them.
"""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET
from psycopg_pool import PoolTimeout

from retrieval import search as searching
from retrieval.bounds.deadline import Deadline
from retrieval.pg.hydrate import ListingView, hydrate
from retrieval.query.parse import BadQueryError
from retrieval.service import budgets
from retrieval.types import CallerDeadlineError, Candidate, NoAnswerError, Query, StageTimeoutError
from retrieval.web import api
from retrieval.web.own_writes import written_position
from retrieval.web.page_context import (
    error_context,
    form_context,
    preview_context,
    results_context,
    unanswered_context,
)
from retrieval.web.reader import keep_reader

# The parts every page is made of, in order; a streamed page sends the first two first.
_START, _RESULTS, _END = (
    "retrieval/page_start.html",
    "retrieval/results.html",
    "retrieval/page_end.html",
)


class _Preview:
    """The lexical stage's candidates, read as soon as it hands them over."""

    def __init__(self, query: Query, deadline: Deadline) -> None:
        self.query = query
        # The request's deadline bounds the read: a preview later than that is no preview.
        self.deadline = deadline
        self.shown = asyncio.Event()
        self.listings: list[ListingView] = []
        self.task: asyncio.Task[None] | None = None

    def start(self, candidates: list[Candidate]) -> None:
        ids = [candidate.listing_id for candidate in candidates]
        self.task = asyncio.create_task(self._read(ids), name="preview")

    async def _read(self, ids: list[int]) -> None:
        try:
            self.listings = await hydrate(
                ids, self.query.text, self.query.k, self.deadline, filters=self.query.filters
            )
        except (StageTimeoutError, PoolTimeout, psycopg.Error, OSError):
            return  # no preview, then: the final answer comes as it would without one
        if self.listings:  # nothing found by words is no preview: the final answer shows it
            self.shown.set()


@require_GET
async def search_page(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    form = form_context(request)
    if not request.GET.get("q"):
        return _page(request, form, None, status=200)
    try:
        query, caller_timeout_ms = api.parse_search(request)
    except BadQueryError as exc:
        return _page(request, form | error_context(exc), None, status=400)
    response = await _progressive(request, form, query, caller_timeout_ms)
    keep_reader(request, response, budgets().current().canary is not None)
    return response


async def _progressive(
    request: HttpRequest, form: dict[str, Any], query: Query, caller_timeout_ms: float | None
) -> HttpResponse | StreamingHttpResponse:
    deadline = api.request_deadline(request, caller_timeout_ms)
    preview = _Preview(query, deadline.end)
    # A later page has no preview: the lexical ranking's slice is not the final one's.
    watcher = preview.start if query.page == 1 else None
    search = asyncio.create_task(
        searching.search(query, deadline, on_lexical=watcher, min_lsn=written_position(request)),
        name="page-search",
    )
    shown = asyncio.create_task(preview.shown.wait(), name="preview-shown")
    try:
        await asyncio.wait({search, shown}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the request went away
        _cancel(search, shown, preview.task)
        raise
    shown.cancel()
    if search.done():
        _cancel(preview.task)
        return _final_page(request, form, query, search)
    return StreamingHttpResponse(
        _streamed(request, form, query, preview, search), content_type="text/html; charset=utf-8"
    )


def _final_page(
    request: HttpRequest,
    form: dict[str, Any],
    query: Query,
    search: "asyncio.Task[searching.Shown]",
) -> HttpResponse:
    try:
        shown = search.result()
    except (NoAnswerError, CallerDeadlineError) as exc:
        status = 503 if isinstance(exc, NoAnswerError) else 504
        response = _page(request, form, unanswered_context(), status=status)
        # The page tells a browser or crawler when to come back, as the API does.
        response["Retry-After"] = str(api.RETRY_AFTER_S)
        return response
    return _page(request, form, results_context(request, query, shown), status=200)


async def _streamed(
    request: HttpRequest,
    form: dict[str, Any],
    query: Query,
    preview: _Preview,
    search: "asyncio.Task[searching.Shown]",
) -> AsyncIterator[str]:
    try:
        first = preview_context(request, query, preview.listings)
        yield _render(request, _START, form) + _render(request, _RESULTS, form | first)
        try:
            shown = await search
        except (NoAnswerError, CallerDeadlineError):
            # The status is sent; what the lexical stage found is still true, so it stays,
            # said to be unfinished.
            final = preview_context(request, query, preview.listings, unfinished=True)
        else:
            final = results_context(request, query, shown)
        yield _render(request, _RESULTS, form | final) + _render(request, _END, form)
    finally:
        _cancel(search, preview.task)


def _page(
    request: HttpRequest, form: dict[str, Any], body: dict[str, Any] | None, *, status: int
) -> HttpResponse:
    context = form | (body or {})
    parts = [_START, _RESULTS, _END] if body is not None else [_START, _END]
    html = "".join(_render(request, part, context) for part in parts)
    return HttpResponse(html, status=status)


def _render(request: HttpRequest, template: str, context: dict[str, Any]) -> str:
    return render_to_string(template, context, request)


def _cancel(*tasks: "asyncio.Task[Any] | None") -> None:
    for task in tasks:
        if task is not None and not task.done():
            task.cancel()
