"""Index generations in the admin: built from a button, watched on a progress bar that
polls progress.json (ingestion/static/ingestion/generation_progress.js) with no reload,
then activated, rolled back or retired. Building and each step have a page saying what
will happen; only that page's POST acts, and a step that must not happen is refused there
with the reason, never attempted.

Who may: the pages and progress.json need view permission, building and the steps change
permission (the ops group holds both, migrations/0009; editors neither: 403)."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.safestring import SafeString

from ingestion import generations, tasks
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.models import Audience, IndexGeneration, Listing, ListingEmbedding

TEMPLATES = "admin/ingestion/indexgeneration"
CONFIRM = "confirmed"
State = IndexGeneration.State


def figures(generation: IndexGeneration) -> dict[str, Any]:
    """What the progress bar shows, from a generation of `generations.with_progress`: the
    page renders it and progress.json sends it, so both say the same."""
    done, total = (
        int(getattr(generation, "embedded", 0)),
        int(getattr(generation, "active_listings", 0)),
    )
    share = f"{100 * done / total:.1f}%" if total else "100%"
    return {
        "state": generation.state,
        "embedded": done,
        "total": total,
        "ready": generation.state in (State.READY, State.ACTIVE),
        "label": f"{share} ({done}/{total}) embedded, {generation.state}",
    }


@dataclass(frozen=True)
class Step:
    """A step on one generation, from its own confirmation page."""

    name: str  # the page's URL ends <id>/<name>/
    title: str
    refusal: Callable[[IndexGeneration], str | None]  # why not, or None
    run: Callable[[IndexGeneration], str]  # does it; what was done


def _activation_refused(generation: IndexGeneration) -> str | None:
    if generation.state in (State.ACTIVE, State.RETIRED):
        return f"Generation {generation.pk} is {generation.state}."
    done, total = generations.progress(generation)
    if done < total:
        return f"Generation {generation.pk} is not built yet: {done} of {total} listings embedded."
    return None


def _activate(generation: IndexGeneration) -> str:
    generations.activate(generation)
    return f"Generation {generation.pk} is active; searches use it within a second."


def _rollback_refused(generation: IndexGeneration) -> str | None:
    if generation.state != State.ACTIVE:
        return f"Generation {generation.pk} is not the active one: there is nothing to roll back."
    if generations.previous_generation(generation.audience) is None:
        return "No generation was active before this one, or it has been retired."
    return None


def _rollback(generation: IndexGeneration) -> str:
    previous = generations.rollback(generation.audience)
    return f"Generation {previous.pk} is active again; generation {generation.pk} is ready."


def _retirement_refused(generation: IndexGeneration) -> str | None:
    if generation.state == State.ACTIVE:
        return "The active generation cannot be retired: activate another one first."
    if generation.state == State.RETIRED:
        return f"Generation {generation.pk} is retired already."
    return None


def _retire(generation: IndexGeneration) -> str:
    generations.retire(generation)
    return f"Generation {generation.pk} is retired; its vectors and index are dropped."


STEPS = {
    step.name: step
    for step in (
        Step("activate", "Activate this generation", _activation_refused, _activate),
        Step("rollback", "Roll back to the previous generation", _rollback_refused, _rollback),
        Step("retire", "Retire this generation", _retirement_refused, _retire),
    )
}


@admin.register(IndexGeneration)
class IndexGenerationAdmin(admin.ModelAdmin[IndexGeneration]):
    list_display = (
        "pk",
        "embedding_model",
        "dimensions",
        "text_pipeline_version",
        "state",
        "progress",
        "created_at",
        "activated_at",
    )
    # Nothing is typed in: a generation changes by the steps above only.
    readonly_fields = (
        "embedding_model",
        "dimensions",
        "text_pipeline_version",
        "audience",
        "state",
        "activated_at",
        "retired_at",
    )
    actions = None

    class Media:
        js = ("ingestion/generation_progress.js",)
        css = {"all": ("ingestion/generations.css",)}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # generations are built with the button, never typed in

    def has_delete_permission(
        self, request: HttpRequest, obj: IndexGeneration | None = None
    ) -> bool:
        return False  # retiring drops a generation's vectors and its index; a delete would not

    def get_queryset(self, request: HttpRequest) -> QuerySet[IndexGeneration]:
        # The progress bars in the page's one query, not two counts per row.
        return generations.with_progress(super().get_queryset(request))

    @admin.display(description="embedded")
    def progress(self, generation: IndexGeneration) -> SafeString | str:
        if generation.state == State.RETIRED:
            return "—"
        return render_to_string(f"{TEMPLATES}/progress.html", self._bar(generation))

    def _bar(self, generation: IndexGeneration) -> dict[str, Any]:
        return {
            "generation": generation,
            "figures": figures(generation),
            "url": reverse("admin:ingestion_indexgeneration_progress", args=[generation.pk]),
        }

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        name = "ingestion_indexgeneration"
        return [
            path("build/", view(self.build_view), name=f"{name}_build"),
            path("<int:pk>/progress.json", view(self.progress_view), name=f"{name}_progress"),
            *(
                path(
                    f"<int:pk>/{step}/", view(self.step_view), {"step": step}, name=f"{name}_{step}"
                )
                for step in STEPS
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        can_build = self.has_change_permission(request)
        return super().changelist_view(request, {**(extra_context or {}), "can_build": can_build})

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if request.method == "POST":
            raise PermissionDenied  # every field is read-only: there is nothing to save
        context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False}
        return super().change_view(request, object_id, form_url, context)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: IndexGeneration | None = None,
    ) -> HttpResponse:
        if obj is not None:  # the page's own generation, with its progress: no query more
            context.update(self._bar(obj), steps=self._steps_offered(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _steps_offered(self, request: HttpRequest, generation: IndexGeneration) -> list[Step]:
        """The steps whose buttons the page shows: those its state allows (activating one
        still being built is refused on its page, with the figures, rather than hidden)."""
        if not self.has_change_permission(request, generation):
            return []
        offered = {
            State.BUILDING: ["activate", "retire"],
            State.READY: ["activate", "retire"],
            State.ACTIVE: ["rollback"],
        }.get(State(generation.state), [])
        return [STEPS[name] for name in offered]

    def build_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        if request.method == "POST" and CONFIRM in request.POST:
            generation = generations.create_generation(MODEL_NAME, DIMENSIONS)
            transaction.on_commit(tasks.schedule_embedding)
            messages.success(request, f"Building generation {generation.pk} in the background.")
            return HttpResponseRedirect(self._change_url(generation))
        active = generations.active_generation()
        return self._confirmation(
            request,
            "build.html",
            "Build a new generation",
            model=MODEL_NAME,
            dimensions=DIMENSIONS,
            pipeline=generations.TEXT_PIPELINE_VERSION,
            listings=Listing.objects.filter(
                status=Listing.Status.ACTIVE, audience=Audience.PUBLIC
            ).count(),
            active=active,
            back=reverse("admin:ingestion_indexgeneration_changelist"),
        )

    def progress_view(self, request: HttpRequest, pk: int) -> JsonResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        generation = get_object_or_404(self.get_queryset(request), pk=pk)
        return JsonResponse(figures(generation))

    def step_view(self, request: HttpRequest, pk: int, step: str) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        generation = get_object_or_404(IndexGeneration, pk=pk)
        chosen = STEPS[step]
        refusal = chosen.refusal(generation)
        if request.method == "POST" and CONFIRM in request.POST:
            try:
                if refusal is not None:
                    raise ValueError(refusal)
                messages.success(request, chosen.run(generation))
            except ValueError as exc:  # refused, or made moot by a step someone else took
                messages.error(request, str(exc))
            return HttpResponseRedirect(self._change_url(generation))
        return self._confirmation(
            request,
            f"{step}.html",
            chosen.title,
            generation=generation,
            refusal=refusal,
            active=generations.active_generation(generation.audience),
            previous=generations.previous_generation(generation.audience),
            vectors=ListingEmbedding.objects.filter(generation=generation).count(),
            back=self._change_url(generation),
        )

    def _confirmation(
        self, request: HttpRequest, template: str, title: str, **context: object
    ) -> TemplateResponse:
        return TemplateResponse(
            request,
            f"{TEMPLATES}/{template}",
            {
                **self.admin_site.each_context(request),
                "title": title,
                "opts": self.model._meta,
                "confirm": CONFIRM,
                **context,
            },
        )

    @staticmethod
    def _change_url(generation: IndexGeneration) -> str:
        return reverse("admin:ingestion_indexgeneration_change", args=[generation.pk])
