"""Index generations in the admin (issue 13, item 6): built from a button with no row
selected, watched through progress.json, activated, rolled back and retired, each through
a page saying what will happen; what must not happen refused there; a generation built
this way ready once the embedding sweep has embedded every listing, and not before.

Committed transactions (`transaction=True`): building creates an index, which Postgres
refuses in a transaction with deferred foreign-key checks pending, and the sweep's lanes
read through connections of their own."""

import psycopg
import pytest
from django.contrib.auth.models import Permission, User
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from ingestion import generations, tasks
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.models import IndexGeneration, Listing, ListingEmbedding
from ingestion.upsert import apply_draft
from tests.admin_pages import EDITORS, OPS, client_of, make_roles
from tests.factories import draft, source

pytestmark = pytest.mark.django_db(transaction=True)
State = IndexGeneration.State
CHANGELIST = reverse("admin:ingestion_indexgeneration_changelist")
BUILD = reverse("admin:ingestion_indexgeneration_build")
CONFIRMED = {"confirmed": "yes"}


def _url(step: str, generation: IndexGeneration) -> str:
    return reverse(f"admin:ingestion_indexgeneration_{step}", args=[generation.pk])


@transaction.atomic
def _listings(count: int) -> list[Listing]:
    feed = source()
    for number in range(count):
        apply_draft(feed, draft(f"id-{number}", title=f"Recital {number}"), timezone.now())
    return list(Listing.objects.order_by("pk"))


def _embed(generation: IndexGeneration, listings: list[Listing]) -> None:
    """Vectors of `listings`' current versions in `generation`, without the model."""
    ListingEmbedding.objects.bulk_create(
        ListingEmbedding(
            listing=listing,
            generation=generation,
            embedding=[1.0] + [0.0] * (DIMENSIONS - 1),
            content_version=listing.content_version,
            embedded_at=timezone.now(),
        )
        for listing in listings
    )


def _state(generation: IndexGeneration) -> str:
    generation.refresh_from_db()
    return generation.state


@pytest.fixture
def active() -> IndexGeneration:
    return generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)


@pytest.fixture
def ready(active: IndexGeneration) -> IndexGeneration:
    """A second generation, built (every listing embedded) and ready, beside the active one."""
    listings = _listings(3)
    _embed(active, listings)
    built = generations.create_generation(MODEL_NAME, DIMENSIONS)
    _embed(built, listings)
    generations.mark_ready(built)
    built.refresh_from_db()
    return built


@pytest.fixture
def roles() -> None:
    make_roles()


def test_the_build_button_asks_first_then_builds_without_a_row_selected(
    admin_client: Client, active: IndexGeneration
) -> None:
    _listings(3)
    page = admin_client.get(CHANGELIST).content.decode()
    assert f'action="{BUILD}"' in page
    assert "Build a new generation" in page

    # The button's post, no rows ticked and no action named: the page saying what happens.
    asked = admin_client.post(BUILD).content.decode()
    assert f"embed the 3 active public listings with\n<strong>{MODEL_NAME}</strong>" in asked
    assert f"({DIMENSIONS} dimensions, text pipeline v{generations.TEXT_PIPELINE_VERSION})" in asked
    assert f"Generation {active.pk}, active now, keeps serving searches meanwhile." in asked
    assert IndexGeneration.objects.count() == 1

    response = admin_client.post(BUILD, CONFIRMED)
    built = IndexGeneration.objects.latest("pk")
    assert response.status_code == 302
    assert response["Location"] == _url("change", built)
    assert (built.state, built.embedding_model, built.dimensions) == (
        State.BUILDING,
        MODEL_NAME,
        DIMENSIONS,
    )
    assert generations.active_generation() == active  # still serving
    page = admin_client.get(response["Location"]).content.decode()
    assert f'data-progress-url="{_url("progress", built)}"' in page
    assert 'value="0"' in page
    assert 'max="3"' in page
    assert "0.0% (0/3) embedded, building" in page
    assert "Reload for the latest figure" in page  # what a page without JavaScript offers


def test_a_get_of_any_confirmation_page_changes_nothing(
    admin_client: Client, active: IndexGeneration, ready: IndexGeneration
) -> None:
    for url in (BUILD, _url("activate", ready), _url("retire", ready)):
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert 'name="confirmed"' in response.content.decode()
    assert IndexGeneration.objects.count() == 2
    assert (_state(active), _state(ready)) == (State.ACTIVE, State.READY)
    generations.activate(ready)  # the first one is then there to roll back to
    assert 'name="confirmed"' in admin_client.get(_url("rollback", ready)).content.decode()
    assert (_state(active), _state(ready)) == (State.READY, State.ACTIVE)
    assert ListingEmbedding.objects.filter(generation=ready).count() == 3


def test_progress_json_says_what_the_generation_holds(
    admin_client: Client, active: IndexGeneration
) -> None:
    listings = _listings(4)
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    _embed(building, listings[:1])
    figures = admin_client.get(_url("progress", building)).json()
    assert figures == {
        "state": "building",
        "embedded": 1,
        "total": 4,
        "ready": False,
        "label": "25.0% (1/4) embedded, building",
    }
    _embed(building, listings[1:])
    generations.mark_ready(building)
    figures = admin_client.get(_url("progress", building)).json()
    assert (figures["embedded"], figures["total"], figures["ready"]) == (4, 4, True)


def test_activate_then_roll_back_then_retire_each_through_its_page(
    admin_client: Client, active: IndexGeneration, ready: IndexGeneration
) -> None:
    asked = admin_client.get(_url("activate", ready)).content.decode()
    assert f"Generation {ready.pk} ({MODEL_NAME}, {DIMENSIONS} dimensions) becomes active" in asked
    assert f"Generation {active.pk}, active now, becomes ready" in asked
    assert admin_client.post(_url("activate", ready), CONFIRMED).status_code == 302
    assert (_state(active), _state(ready)) == (State.READY, State.ACTIVE)

    asked = admin_client.get(_url("rollback", ready)).content.decode()
    assert f"Generation {active.pk} ({MODEL_NAME}, active until it was replaced" in asked
    assert f"Generation {ready.pk}, active now, becomes ready" in asked
    admin_client.post(_url("rollback", ready), CONFIRMED)
    assert (_state(active), _state(ready)) == (State.ACTIVE, State.READY)

    asked = admin_client.get(_url("retire", ready)).content.decode()
    assert "its 3 vectors and its HNSW index are dropped" in asked
    assert "This cannot be undone." in asked
    admin_client.post(_url("retire", ready), CONFIRMED)
    assert _state(ready) == State.RETIRED
    assert not ListingEmbedding.objects.filter(generation=ready).exists()


def test_the_change_page_offers_the_steps_its_generation_s_state_allows(
    admin_client: Client, active: IndexGeneration, ready: IndexGeneration
) -> None:
    page = admin_client.get(_url("change", ready)).content.decode()
    assert _url("activate", ready) in page
    assert _url("retire", ready) in page
    assert _url("rollback", ready) not in page
    page = admin_client.get(_url("change", active)).content.decode()
    assert _url("rollback", active) in page
    assert _url("activate", active) not in page
    assert _url("retire", active) not in page
    assert 'name="_save"' not in page  # nothing on it can be typed in


@pytest.mark.parametrize(
    ("step", "refusal"),
    [
        ("activate", "is not built yet: 1 of 3 listings embedded."),
        ("retire", "The active generation cannot be retired: activate another one first."),
        ("rollback", "No generation was active before this one, or it has been retired."),
    ],
)
def test_what_must_not_happen_is_refused_with_the_reason(
    admin_client: Client, active: IndexGeneration, step: str, refusal: str
) -> None:
    listings = _listings(3)
    incomplete = generations.create_generation(MODEL_NAME, DIMENSIONS)
    _embed(incomplete, listings[:1])
    target = incomplete if step == "activate" else active
    asked = admin_client.get(_url(step, target)).content.decode()
    assert refusal in asked
    assert 'name="confirmed"' not in asked  # nothing to confirm
    response = admin_client.post(_url(step, target), CONFIRMED, follow=True)
    assert refusal in response.content.decode()  # posted anyway: refused again, saying why
    assert (_state(active), _state(incomplete)) == (State.ACTIVE, State.BUILDING)
    assert ListingEmbedding.objects.filter(generation=incomplete).count() == 1


def test_editors_get_403_everywhere_on_generations(roles: None, ready: IndexGeneration) -> None:
    editor = client_of(EDITORS)
    for url in (CHANGELIST, BUILD, _url("progress", ready), _url("change", ready)):
        assert editor.get(url).status_code == 403, url
    for step in ("activate", "retire"):
        assert editor.post(_url(step, ready), CONFIRMED).status_code == 403
    assert editor.post(BUILD, CONFIRMED).status_code == 403
    assert IndexGeneration.objects.count() == 2
    assert _state(ready) == State.READY


def test_ops_build_and_activate_as_migration_0009_lets_them(
    roles: None, active: IndexGeneration, ready: IndexGeneration
) -> None:
    ops = client_of(OPS)
    assert "Build a new generation" in ops.get(CHANGELIST).content.decode()
    assert ops.post(BUILD, CONFIRMED).status_code == 302
    assert IndexGeneration.objects.filter(state=State.BUILDING).count() == 1
    assert ops.post(_url("activate", ready), CONFIRMED).status_code == 302
    assert _state(ready) == State.ACTIVE


def test_who_may_only_view_sees_figures_but_no_button_and_cannot_act(
    ready: IndexGeneration,
) -> None:
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_indexgeneration"))
    client = Client()
    client.force_login(viewer)
    assert "Build a new generation" not in client.get(CHANGELIST).content.decode()
    assert _url("activate", ready) not in client.get(_url("change", ready)).content.decode()
    assert client.get(_url("progress", ready)).json()["ready"] is True
    for url in (BUILD, _url("activate", ready), _url("retire", ready)):
        assert client.get(url).status_code == 403, url
        assert client.post(url, CONFIRMED).status_code == 403, url
    assert IndexGeneration.objects.count() == 2
    assert _state(ready) == State.READY


# Queries for an ops member, however many generations: the user (the session lives in
# Redis), the user's own permissions and their groups' (once: Django caches them on the
# user for the request), then the page's own. A query per row (a bar's figures counted
# apart) would make the page of 120 generations differ from the page of 20.
USER_AND_PERMISSIONS = 3
CHANGELIST_QUERIES = USER_AND_PERMISSIONS + 3  # the count, filtered and in all; the rows
CHANGE_PAGE_QUERIES = USER_AND_PERMISSIONS + 1  # the generation with its progress
PROGRESS_QUERIES = USER_AND_PERMISSIONS + 1


def test_the_pages_make_the_same_queries_however_many_generations(
    roles: None,
    active: IndexGeneration,
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    listings = _listings(3)
    ops = client_of(OPS)
    for count in (20, 120):
        made = IndexGeneration.objects.bulk_create(
            IndexGeneration(
                embedding_model=MODEL_NAME,
                dimensions=DIMENSIONS,
                text_pipeline_version=1,
                state=[State.BUILDING, State.READY][n % 2],
            )
            for n in range(count - IndexGeneration.objects.count())
        )
        for generation in made:
            _embed(generation, listings[: generation.pk % 4])
        with django_assert_num_queries(CHANGELIST_QUERIES):
            page = ops.get(CHANGELIST + "?all=").content.decode()
        assert page.count("<progress ") == count
        building = made[0]
        with django_assert_num_queries(CHANGE_PAGE_QUERIES):
            assert ops.get(_url("change", building)).status_code == 200
        with django_assert_num_queries(PROGRESS_QUERIES):
            assert ops.get(_url("progress", building)).status_code == 200


def test_a_generation_built_from_the_admin_is_ready_once_the_sweep_has_embedded_all(
    admin_client: Client, active: IndexGeneration
) -> None:
    _listings(3)
    admin_client.post(BUILD, CONFIRMED)
    built = IndexGeneration.objects.latest("pk")
    tasks.embed_pending()  # the task's own function, the real model, in this process
    assert generations.progress(built) == (3, 3)
    assert _state(built) == State.READY
    assert admin_client.get(_url("progress", built)).json()["ready"] is True


def test_it_is_not_ready_while_a_listing_is_held_by_another_sweep_s_claim(
    admin_client: Client, active: IndexGeneration, test_database_url: str
) -> None:
    listings = _listings(3)
    admin_client.post(BUILD, CONFIRMED)
    built = IndexGeneration.objects.latest("pk")
    with psycopg.connect(test_database_url) as other_sweep:
        other_sweep.execute(
            "SELECT id FROM ingestion_listing WHERE id = %s FOR UPDATE", [listings[0].pk]
        )
        tasks.embed_pending()  # passes the held listing by (SKIP LOCKED): nothing left to claim
        assert generations.progress(built) == (2, 3)
        assert _state(built) == State.BUILDING
    tasks.embed_pending()  # the claim let go of, uncommitted: the listing is still pending
    assert generations.progress(built) == (3, 3)
    assert _state(built) == State.READY


def test_a_listing_added_once_it_is_ready_is_embedded_in_it_too(
    admin_client: Client, active: IndexGeneration
) -> None:
    _listings(2)
    admin_client.post(BUILD, CONFIRMED)
    built = IndexGeneration.objects.latest("pk")
    tasks.embed_pending()
    assert _state(built) == State.READY
    # Committed after the sweep found the generation complete, as a poll's listing can be.
    with transaction.atomic():
        apply_draft(source("Late feed"), draft("late", title="Late addition"), timezone.now())
    assert generations.progress(built) == (2, 3)
    tasks.embed_pending()
    assert generations.progress(built) == (3, 3)
    admin_client.post(_url("activate", built), CONFIRMED)
    assert _state(built) == State.ACTIVE
