# Each evaluation set gets an audience of its own (ingestion.models.Audience): its source
# and listings move from the shared "evaluation" audience to "evaluation:<name>". The
# shared evaluation generation held every set's vectors and cannot be split, so it is
# retired; the next import of each set embeds it into a generation of its own.

from typing import Any

from django.db import migrations
from django.utils import timezone

SHARED = "evaluation"


def per_set(apps: Any, schema_editor: Any) -> None:
    EvaluationSet = apps.get_model("evaluation", "EvaluationSet")
    Source = apps.get_model("ingestion", "Source")
    Listing = apps.get_model("ingestion", "Listing")
    IndexGeneration = apps.get_model("ingestion", "IndexGeneration")
    for evaluation_set in EvaluationSet.objects.all():
        audience = f"evaluation:{evaluation_set.name}"
        Source.objects.filter(pk=evaluation_set.source_id).update(audience=audience)
        Listing.objects.filter(audience=SHARED, records__source_id=evaluation_set.source_id).update(
            audience=audience
        )
    IndexGeneration.objects.filter(audience=SHARED).exclude(state="retired").update(
        state="retired", retired_at=timezone.now()
    )


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0002_evaluation_runs"),
        ("ingestion", "0005_audience_per_evaluation_set"),
    ]

    operations = [migrations.RunPython(per_set, migrations.RunPython.noop)]
