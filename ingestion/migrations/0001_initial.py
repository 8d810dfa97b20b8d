# Initial schema; the extensions and the immutable helper come first.

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
import pgvector.django.vector
from django.contrib.postgres.operations import TrigramExtension, UnaccentExtension
from django.db import migrations, models
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        VectorExtension(),
        TrigramExtension(),
        UnaccentExtension(),
        migrations.RunSQL(
            "CREATE FUNCTION immutable_array_to_string(text[], text) RETURNS text"
            " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string($1, $2) $$",
            "DROP FUNCTION immutable_array_to_string(text[], text)",
        ),
        migrations.CreateModel(
            name="Source",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("feed", "Publisher feed (RSS/Atom)"),
                            ("calendar", "Venue calendar (iCalendar)"),
                            ("editorial", "Editorial records"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "url",
                    models.CharField(
                        blank=True, help_text="http(s) URL or local file path", max_length=2000
                    ),
                ),
                ("active", models.BooleanField(default=True)),
                ("poll_interval_s", models.PositiveIntegerField(default=900)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("next_poll_at", models.DateTimeField(blank=True, db_index=True, null=True)),
                ("etag", models.CharField(blank=True, max_length=500)),
                ("last_modified", models.CharField(blank=True, max_length=100)),
                ("payload_hash", models.CharField(blank=True, max_length=64)),
                ("breaker_state", models.CharField(default="closed", max_length=16)),
                ("breaker_opened_at", models.DateTimeField(blank=True, null=True)),
                ("breaker_window", models.JSONField(blank=True, default=dict)),
                ("last_success_at", models.DateTimeField(blank=True, null=True)),
                ("last_error", models.TextField(blank=True)),
                ("last_error_permanent", models.BooleanField(blank=True, null=True)),
                ("last_error_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.CreateModel(
            name="IndexGeneration",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("embedding_model", models.CharField(max_length=200)),
                ("dimensions", models.PositiveSmallIntegerField()),
                ("text_pipeline_version", models.PositiveSmallIntegerField()),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("building", "Building"),
                            ("ready", "Ready"),
                            ("active", "Active"),
                            ("retired", "Retired"),
                        ],
                        default="building",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("activated_at", models.DateTimeField(blank=True, null=True)),
                ("retired_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("state", "active")),
                        fields=("state",),
                        name="one_active_generation",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="Listing",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("title", models.CharField(max_length=500)),
                ("description", models.TextField(blank=True)),
                ("venue", models.CharField(blank=True, max_length=300)),
                (
                    "aliases",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=300),
                        blank=True,
                        default=list,
                        size=None,
                    ),
                ),
                ("starts_at", models.DateTimeField(blank=True, null=True)),
                ("ends_at", models.DateTimeField(blank=True, null=True)),
                ("timezone", models.CharField(blank=True, max_length=64)),
                ("all_day", models.BooleanField(default=False)),
                ("url", models.URLField(blank=True, max_length=2000)),
                (
                    "status",
                    models.CharField(
                        choices=[("active", "Active"), ("withdrawn", "Withdrawn")],
                        default="active",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("content_version", models.PositiveIntegerField(default=1)),
                ("fetched_at", models.DateTimeField(blank=True, null=True)),
                ("fetched_kind", models.CharField(blank=True, max_length=16)),
                ("lexically_searchable_at", models.DateTimeField(blank=True, null=True)),
                (
                    "search_vector",
                    models.GeneratedField(
                        db_persist=True,
                        expression=django.contrib.postgres.search.CombinedSearchVector(
                            django.contrib.postgres.search.CombinedSearchVector(
                                django.contrib.postgres.search.CombinedSearchVector(
                                    django.contrib.postgres.search.SearchVector(
                                        "title", config="english", weight="A"
                                    ),
                                    "||",
                                    django.contrib.postgres.search.SearchVector(
                                        "venue", config="english", weight="B"
                                    ),
                                    django.contrib.postgres.search.SearchConfig("english"),
                                ),
                                "||",
                                django.contrib.postgres.search.SearchVector(
                                    models.Func(
                                        "aliases",
                                        models.Value(" "),
                                        function="immutable_array_to_string",
                                        output_field=models.TextField(),
                                    ),
                                    config="english",
                                    weight="B",
                                ),
                                django.contrib.postgres.search.SearchConfig("english"),
                            ),
                            "||",
                            django.contrib.postgres.search.SearchVector(
                                "description", config="english", weight="C"
                            ),
                            django.contrib.postgres.search.SearchConfig("english"),
                        ),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
            ],
            options={
                "indexes": [
                    django.contrib.postgres.indexes.GinIndex(
                        fields=["search_vector"], name="listing_search_vector_gin"
                    ),
                    django.contrib.postgres.indexes.GinIndex(
                        fields=["title"], name="listing_title_trgm", opclasses=["gin_trgm_ops"]
                    ),
                    models.Index(fields=["starts_at"], name="listing_starts_at"),
                ],
            },
        ),
        migrations.CreateModel(
            name="ListingEmbedding",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "listing",
                        "generation",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("embedding", pgvector.django.vector.VectorField()),
                ("content_version", models.PositiveIntegerField()),
                ("embedded_at", models.DateTimeField()),
                (
                    "generation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="ingestion.indexgeneration"
                    ),
                ),
                (
                    "listing",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="ingestion.listing"
                    ),
                ),
            ],
            options={
                "db_table": "ingestion_listing_embedding",
            },
        ),
        migrations.CreateModel(
            name="Poll",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField()),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("ok", "Ok"),
                            ("not_modified", "Not Modified"),
                            ("skipped", "Skipped (breaker open)"),
                            ("failed", "Fetch failed"),
                            ("rejected", "Payload rejected"),
                        ],
                        max_length=16,
                    ),
                ),
                ("items", models.PositiveIntegerField(default=0)),
                ("new", models.PositiveIntegerField(default=0)),
                ("updated", models.PositiveIntegerField(default=0)),
                ("unchanged", models.PositiveIntegerField(default=0)),
                ("withdrawn", models.PositiveIntegerField(default=0)),
                ("quarantined", models.PositiveIntegerField(default=0)),
                ("error", models.TextField(blank=True)),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="polls",
                        to="ingestion.source",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                ("token_hash", models.CharField(max_length=64, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("revoked", models.BooleanField(default=False)),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="ingestion.source"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="SourceRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("external_id", models.CharField(max_length=1000)),
                ("content_hash", models.CharField(max_length=64)),
                ("withdrawn", models.BooleanField(default=False)),
                ("data", models.JSONField(default=dict)),
                ("first_seen_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "listing",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="records",
                        to="ingestion.listing",
                    ),
                ),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="records",
                        to="ingestion.source",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="QuarantinedItem",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("position", models.IntegerField(blank=True, null=True)),
                ("external_id", models.CharField(blank=True, max_length=1000)),
                ("reason", models.TextField()),
                ("permanent", models.BooleanField(default=True)),
                ("excerpt", models.TextField(blank=True)),
                ("raw", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("retry_requested_at", models.DateTimeField(blank=True, null=True)),
                ("resolved_at", models.DateTimeField(blank=True, null=True)),
                (
                    "poll",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="ingestion.poll",
                    ),
                ),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="quarantine",
                        to="ingestion.source",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("resolved_at", None)),
                        fields=["source"],
                        name="quarantine_open",
                    )
                ],
            },
        ),
        migrations.AddIndex(
            model_name="poll",
            index=models.Index(fields=["source", "-started_at"], name="poll_source_recent"),
        ),
        migrations.AddConstraint(
            model_name="sourcerecord",
            constraint=models.UniqueConstraint(
                fields=("source", "external_id"), name="record_per_source_id"
            ),
        ),
    ]
