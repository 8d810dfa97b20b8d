# What a restarted stack needs to warm up before it takes traffic (retrieval/warming/warm_up.py):
# pg_prewarm (a contrib module, shipped with every Postgres build, the embedded wheel's
# included), and the record of which server start the stack was last warmed after. One
# row at most; in Postgres, not Redis, because readiness must not hang on Redis, which a
# search can do without.

from django.contrib.postgres.operations import CreateExtension
from django.db import migrations

WARM_UP = """
CREATE TABLE retrieval_warm_up (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    server_started_at timestamptz NOT NULL,
    warmed_at timestamptz NOT NULL
);
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0005_metric_rollups")]

    operations = [
        CreateExtension("pg_prewarm"),
        migrations.RunSQL(WARM_UP, "DROP TABLE retrieval_warm_up"),
    ]
