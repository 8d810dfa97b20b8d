from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ingestion import generations, tasks
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.models import IndexGeneration


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
    readonly_fields = (
        "embedding_model",
        "dimensions",
        "text_pipeline_version",
        "state",
        "activated_at",
        "retired_at",
    )
    actions = ("build_new", "activate", "rollback", "retire")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # generations are built with the action, never typed in

    def get_queryset(self, request: HttpRequest) -> QuerySet[IndexGeneration]:
        # The page's progress column in its one query, not two counts per row.
        return generations.with_progress(super().get_queryset(request))

    @admin.display(description="embedded")
    def progress(self, generation: IndexGeneration) -> str:
        if generation.state == IndexGeneration.State.RETIRED:
            return "—"
        done, total = (
            int(getattr(generation, "embedded", 0)),
            int(getattr(generation, "active_listings", 0)),
        )
        return f"{100 * done / total:.1f}% ({done}/{total})" if total else "100% (0/0)"

    @admin.action(description="Build a new generation (in the background)")
    def build_new(self, request: HttpRequest, queryset: QuerySet[IndexGeneration]) -> None:
        generation = generations.create_generation(MODEL_NAME, DIMENSIONS)
        tasks.schedule_embedding()
        self.message_user(request, f"Building generation {generation.pk}; watch its progress.")

    @admin.action(description="Activate the selected generation")
    def activate(self, request: HttpRequest, queryset: QuerySet[IndexGeneration]) -> None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one generation.", "error")
            return
        generation = queryset.get()
        done, total = generations.progress(generation)
        if done < total:
            self.message_user(request, f"Not built yet: {done}/{total} embedded.", "error")
            return
        generations.activate(generation)
        self.message_user(request, f"Generation {generation.pk} is active.")

    @admin.action(description="Roll back to the previously active generation")
    def rollback(self, request: HttpRequest, queryset: QuerySet[IndexGeneration]) -> None:
        try:
            generation = generations.rollback()
        except ValueError as exc:
            self.message_user(request, str(exc), "error")
            return
        self.message_user(request, f"Generation {generation.pk} is active again.")

    @admin.action(description="Retire the selected generations (drop their vectors)")
    def retire(self, request: HttpRequest, queryset: QuerySet[IndexGeneration]) -> None:
        for generation in queryset:
            try:
                generations.retire(generation)
            except ValueError as exc:
                self.message_user(request, f"Generation {generation.pk}: {exc}", "error")
