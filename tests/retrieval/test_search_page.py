"""The search page (retrieval/web/page.py) end to end on real Postgres, pgvector, Valkey and the
real model: its states, and its progressive response (the lexical preview streamed first
while the vector stage still runs, the final results after it)."""

import asyncio
import re
from collections.abc import AsyncIterator
from urllib.parse import parse_qs

import pytest
from asgiref.sync import sync_to_async
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.test import AsyncClient
from pytest_django.fixtures import Settings

from retrieval.pg import vocabulary
from retrieval.pg.statement import VECTOR_TAG
from tests.conftest import eventually
from tests.search_fixtures import (
    LEXICAL_TABLE,
    VECTOR_TABLE,
    embeddings_locked,
    statements_running,
    tables_locked,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def _chunks(response: HttpResponseBase) -> list[str]:
    """The page as it was sent: one chunk for a plain response, each chunk of a stream."""
    if isinstance(response, StreamingHttpResponse):
        return [bytes(chunk).decode() async for chunk in _stream(response)]
    assert isinstance(response, HttpResponse)
    return [response.content.decode()]


def _stream(response: StreamingHttpResponse) -> AsyncIterator[bytes]:
    content = response.streaming_content
    assert isinstance(content, AsyncIterator), "streamed from an async iterator under ASGI"
    return content


def _section(page: str, section: str) -> str:
    found = re.search(rf'<section id="{section}".*?</section>', page, re.DOTALL)
    assert found, f"no #{section} section"
    return found.group(0)


def _titles(html: str) -> list[str]:
    return re.findall(r'<h3><a href="[^"]*">([^<]*)</a></h3>', html)


def _mode(section_html: str) -> str:
    found = re.search(r'data-mode="([^"]*)"', section_html)
    assert found
    return found.group(1)


@pytest.mark.usefixtures("patient_search")
async def test_the_page_lists_the_final_results_with_their_marked_snippets(
    async_client: AsyncClient, warmed_up: None
) -> None:
    response = await async_client.get("/", {"q": "bread", "timeout_ms": "2000"})

    assert response.status_code == 200
    final = _section("".join(await _chunks(response)), "final")
    assert _mode(final) == "hybrid"
    assert _titles(final)[0] == "Sourdough baking class"
    assert "<mark>bread</mark>" in final
    assert "quick results" not in final


async def test_with_the_vector_stage_stalled_the_preview_is_sent_first_then_the_fallback(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    async with embeddings_locked(test_database_url):
        response = await async_client.get("/", {"q": "organ recital"})
        chunks = await _chunks(response)

    assert response.status_code == 200
    assert response.streaming
    first, rest = chunks[0], "".join(chunks[1:])
    # The first chunk went out before the search had its final answer.
    assert _titles(_section(first, "preview"))[0] == "Organ recital"
    assert 'id="final"' not in first
    final = _section(rest, "final")
    assert _mode(final) == "lexical_fallback"
    assert _titles(final)[0] == "Organ recital"
    assert "quick results" in final
    assert rest.rstrip().endswith("</html>")


async def test_a_request_that_goes_away_mid_stream_cancels_the_search(
    async_client: AsyncClient, warmed_up: None, test_database_url: str, settings: Settings
) -> None:
    # A vector budget far longer than the bound below: only cancellation ends the
    # statement that waits on the lock within it.
    settings.SEARCH_DEADLINE_MS, settings.SEARCH_VECTOR_BUDGET_MS = 20_000, 15_000
    async with embeddings_locked(test_database_url):
        response = await async_client.get("/", {"q": "organ recital"})
        assert isinstance(response, StreamingHttpResponse)
        stream = _stream(response)
        assert 'id="preview"' in bytes(await anext(stream)).decode()

        async def rest() -> bytes:
            return await anext(stream)

        # Waiting for the final chunk, as the ASGI handler does, until the client leaves:
        # then the handler cancels it.
        sending = asyncio.create_task(rest())

        async def vector_waiting() -> bool:
            return await statements_running(test_database_url, VECTOR_TAG) == 1

        await eventually(vector_waiting, 5, "the vector statement waiting on the lock")
        sending.cancel()

        async def vector_gone() -> bool:
            return await statements_running(test_database_url, VECTOR_TAG) == 0

        # Far within the 15 s the statement would otherwise wait.
        await eventually(vector_gone, 2, "the vector statement cancelled")
    assert sending.cancelled()


async def test_no_stage_in_time_is_a_503_that_says_when_to_retry(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    async with tables_locked(test_database_url, LEXICAL_TABLE, VECTOR_TABLE):
        response = await async_client.get("/", {"q": "jazz"})

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    page = "".join(await _chunks(response))
    assert "try again in 1 second" in page
    assert _titles(page) == []


async def test_a_bad_parameter_is_a_400_naming_its_field(async_client: AsyncClient) -> None:
    response = await async_client.get("/", {"q": "x" * 201})

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="error" role="alert">q is longer than 200 characters<' in page
    assert re.search(r'<input type="search" id="q"[^>]*aria-invalid="true"', page)
    assert 'id="final"' not in page


async def test_nothing_found_says_what_to_try_next(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    # Vectors always find a nearest listing: only words can find nothing.
    async with embeddings_locked(test_database_url):
        response = await async_client.get("/", {"q": "zxqv", "when": "past"})
        final = _section("".join(await _chunks(response)), "final")

    assert "No listings match “zxqv”" in final
    assert "Try fewer words" in final
    # The date filters dropped, every other parameter kept.
    assert 'href="?q=zxqv">search at any time</a>' in final


async def test_a_misspelt_search_offers_the_corrected_one(
    async_client: AsyncClient, warmed_up: None, patient_search: None
) -> None:
    # Patient budgets: a search that does not finish shows its quick results without the
    # suggestion (3 runs in 6 on a loaded machine); this is about the suggestion.
    await sync_to_async(vocabulary.refresh)()
    response = await async_client.get("/", {"q": "sourdogh", "timeout_ms": "2000"})
    final = _section("".join(await _chunks(response)), "final")

    link = re.search(r'Did you mean <a href="\?([^"]*)" class="suggestion">sourdough</a>', final)
    assert link
    assert parse_qs(link.group(1).replace("&amp;", "&")) == {
        "q": ["sourdough"],
        "timeout_ms": ["2000"],
    }
    assert "Sourdough baking class" in _titles(final)


async def test_a_full_page_links_to_the_next_with_the_search_kept(
    async_client: AsyncClient, warmed_up: None
) -> None:
    response = await async_client.get(
        "/", {"q": "jazz", "k": "2", "when": "any", "kind": ["feed", "calendar"]}
    )
    final = _section("".join(await _chunks(response)), "final")

    assert len(_titles(final)) == 2
    link = re.search(r'<a href="\?([^"]*)" rel="next">More results</a>', final)
    assert link
    assert link.group(1).replace("&amp;", "&") == (
        "q=jazz&k=2&when=any&kind=feed&kind=calendar&page=2"
    )


async def test_the_form_shows_the_search_as_asked(async_client: AsyncClient) -> None:
    response = await async_client.get(
        "/", {"q": "x" * 201, "when": "this-weekend", "venue": "Barbican", "kind": "editorial"}
    )
    page = response.content.decode()

    assert '<option value="this-weekend" selected>This weekend</option>' in page
    assert 'id="venue" name="venue" value="Barbican"' in page
    assert re.search(r'id="kind-editorial"[^>]*checked', page)
    assert not re.search(r'id="kind-feed"[^>]*checked', page)
