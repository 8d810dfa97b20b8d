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
                ("embedded_at", models.DateTimeField(auto_now_add=True)),
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
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("source", "external_id"), name="record_per_source_id"
                    )
                ],
            },
        ),
    ]
