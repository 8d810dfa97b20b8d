"""A stored normalised title, the key of undated de-duplication: lower-cased, unaccented,
punctuation stripped, whitespace collapsed, so "Café Oto: late night" and "cafe oto late
night!" are one listing. A generated column, so every path that writes a title (ingestion,
a merge or split, an editor) keeps it right and existing rows are filled as it is added;
the draft's side goes through the same function in the lookup, so both sides fold alike
(`immutable_unaccent` is migration 0006's). The partial index holds only the rows an
undated draft may match: active, undated, looked up within one audience."""

from django.db import migrations, models
from django.db.models import Q

FUNCTION = """
CREATE FUNCTION listing_normalised_title(title text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT btrim(regexp_replace(lower(immutable_unaccent(title)), '[^[:alnum:]]+', ' ', 'g'))
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0007_embedding_dates_index"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION listing_normalised_title(text)"),
        migrations.AddField(
            model_name="listing",
            name="normalised_title",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    "title", function="listing_normalised_title", output_field=models.TextField()
                ),
                output_field=models.TextField(),
            ),
        ),
        migrations.AddIndex(
            model_name="listing",
            index=models.Index(
                condition=Q(starts_at__isnull=True, status="active"),
                fields=["audience", "normalised_title"],
                name="listing_undated_title",
            ),
        ),
    ]
