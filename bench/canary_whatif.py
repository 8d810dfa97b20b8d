"""The what-if against a canary (issue 37): under open-loop searches at --fraction of the
capacity limit, a canary of a tighter vector budget for half of the readers; the share of
vector stages the what-if predicts that budget degrades, from the control's stage times
(ops/whatif.py), beside the share the canary's own searches measured (exhausted / eligible,
ops/canary.py). The same minutes, the same load, the same queries.

    .venv/bin/python bench/canary_whatif.py --data-dir /tmp/bench100k [--budget-ms 20]
        [--fraction 0.5] [--minutes 4] [--limit SEARCHES_PER_S]
"""

import argparse
import asyncio
import itertools
import math
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))
from capacity import add_rate_arguments, limit_rate, query_pool
from load import HEADER, Options, steps
from stack import add_stack_arguments, prepare, serve, step_probes

READERS = 10_000  # cookies the requests cycle through: half of them in each arm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-ms", type=float, default=20.0, help="the canary's")
    parser.add_argument("--minutes", type=int, default=4)
    add_rate_arguments(parser, step_seconds=30.0)
    add_stack_arguments(parser)
    args = parser.parse_args()
    with running(args.data_dir), ExitStack() as stack:
        from django.conf import settings
        from django.db import connection
        from django.utils import timezone

        from ingestion import generations
        from ops import canary, history, rollup_writer, whatif
        from retrieval.models import Canary

        postmaster = prepare(args.data_dir)
        pool = query_pool(60_000)
        limit = limit_rate(args.limit, pool, args.capacity_queries, postmaster)
        rate = args.fraction * limit
        print(f"capacity limit {limit:.1f} searches/s; searching at {rate:.1f}/s")
        base_url, groups = serve(stack, None, args.data_dir / "canary-web.log", postmaster)
        options = Options(
            args.step_seconds, args.timeout_s, 1024, False, settings.SEARCH_DEADLINE_MS,
            0.10, readers=READERS,
        )  # fmt: skip
        queries = itertools.cycle(pool)
        generation = generations.active_generation()
        assert generation is not None
        running_canary = canary.start(None, args.budget_ms, settings.SEARCH_DEADLINE_MS, 0.5)
        connection.close()
        time.sleep(2 * 1.0)  # every web process reads it within a second (retrieval/pg/budgets.py)

        async def load() -> None:
            async with step_probes(base_url) as probes:
                count = int(args.minutes * 60 / args.step_seconds)
                rates = [(f"{rate:.1f}/s #{n}", rate) for n in range(count)]
                await steps(base_url, "canary", rates, queries, options, groups, probes)

        print(HEADER, flush=True)
        asyncio.run(load())
        # The web process flushes its roll-ups on the minute: past the next one, all of them.
        time.sleep(62 - time.time() % 60 + 3)
        rollup_writer.flush_this_process()
        now = timezone.now()
        arms = canary.compare(running_canary, now)
        # The canary's minutes alone, as its arms are compared: the ops page's last hour
        # would hold whatever else searched this database in it (another bench's steps).
        minutes = math.ceil((now - running_canary.started_at).total_seconds() / 60)
        recent = history.read(history.Window("the canary", timedelta(minutes=1), minutes), now)
        pick = lambda labels: labels.get("generation") == str(generation.pk)  # noqa: E731
        record = whatif.cumulative(recent, "retrieval_vector_stage_seconds", pick)
        sampled = whatif.cumulative(recent, "retrieval_vector_stage_sampled_seconds", pick)
        predicted = whatif.predict(
            record, settings.SEARCH_VECTOR_BUDGET_MS / 1000, args.budget_ms / 1000, sampled
        )
        canary.end(running_canary, Canary.State.ROLLED_BACK, None, Canary.Why.OPERATOR, now)
        measured = arms["canary"].exhausted_ratio
        print(
            f"\ncanary: vector budget {args.budget_ms:g} ms for half of {READERS} readers,"
            f" control {settings.SEARCH_VECTOR_BUDGET_MS:g} ms; {args.minutes} minutes at"
            f" {rate:.1f} searches/s"
        )
        print(f"what-if from the control's {record.total:.0f} stages: {predicted.degraded_text}")
        print(f"canary measured over its {arms['canary'].answers} searches: {measured}")
        if predicted.degraded is not None and measured.value is not None:
            gap = abs(predicted.degraded - measured.value) * 100
            print(f"difference {gap:.2f} percentage points (target <= 2)")
        for arm, f in arms.items():
            print(
                f"{arm:8s} {f.answers} searches, fallback share {f.fallback_share}, exhausted"
                f" {f.exhausted_ratio}, p50 {f.p50_ms} ms, p99 {f.p99_ms} ms"
            )


if __name__ == "__main__":
    main()
