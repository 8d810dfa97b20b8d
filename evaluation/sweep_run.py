"""Running the vector-budget sweep against the running system (`manage.py sweep_budgets`).

An evaluation set's judged queries go to GET /api/evaluation/search of a web process on
this machine, first unbounded (the reference recall), then at each vector budget, each
pass over the queries by `concurrency` clients at once. Optionally an ingest stream
(evaluation/sweep_stream.py) posts records to the same system at a fixed rate, from the
reference run on, so the budgets are compared with a reference measured under the same
load.

The reference run is preceded by one unscored pass, so that its latency, which every
budget's is compared with, does not include the server warming up.

Bounded, whatever happens: every request goes to loopback (`loopback_base_url`, and no
proxy from the environment), the whole run stops after `max_seconds` (the budgets done by
then are reported, the run marked stopped early), and what the run made is undone at the
end (the set's token revoked, the stream's source, token and listings deleted) so repeated
sweeps start equal.

Each budget starts with no cached ranking of the evaluation generation: the reference run
just cached every query's full ranking, and serving those as cache fallbacks would hide
what a budget costs a query the cache has not seen. Each also starts with the evaluation
vector breaker closed (waiting out its cool-down if the last budget opened it): a small
budget trips it, and its trip would otherwise skip the next budget's vector stages.
Within a budget both work as they do for the public, and what they do shows in the
figures (`cache_fallback`, `breaker_open`). The cool-down waited is this process's
VECTOR_BREAKER_COOLDOWN_S: the web processes are assumed to run with the same settings.
"""

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import httpx

from evaluation.models import EvaluationSet
from evaluation.paths import UNBOUNDED
from evaluation.sweep import (
    RECALL_K,
    RULE,
    Answer,
    BudgetFigures,
    Recommendation,
    budget_figures,
    loopback_base_url,
    recommend,
)
from evaluation.sweep_stream import (
    STREAM_TEXTS,
    IngestFigures,
    IngestStream,
    fresh_stream_source,
    remove_stream,
)
from evaluation.views import BREAKER_KEY
from ingestion import generations
from ingestion.models import ApiToken, ListingEmbedding
from ingestion.tokens import create_token
from resilience import redis_keys
from resilience.breaker import policy_from_settings
from resilience.redis_clients import get_redis

SEARCH_PATH: Final = "/api/evaluation/search"
# Past the breaker's cool-down before the next budget: its processes' clocks and reads
# (resilience.shared_breaker.FRESH_S) need a moment more.
BREAKER_SETTLE_S: Final = 0.5
# The reference run: budgets no stage misses (those `evaluate` scores with).
UNBOUNDED_PARAMS: Final = {
    "vector_budget_ms": f"{UNBOUNDED.vector_budget_ms:g}",
    "deadline_ms": f"{UNBOUNDED.objective_ms:g}",
}
# A request the server has given up on answers within its deadline; this only catches
# a server that stopped answering at all.
REQUEST_TIMEOUT_S: Final = UNBOUNDED.objective_ms / 1000 + 5


@dataclass(frozen=True)
class SweepOptions:
    base_url: str
    budgets: tuple[float, ...]
    concurrency: int = 8
    rounds: int = 1
    ingest_rate: float = 0.0  # listings per second; 0: no stream
    max_seconds: float = 1800.0
    stream_texts: Path = STREAM_TEXTS


@dataclass
class SweepReport:
    collection: str
    options: SweepOptions
    queries: int
    reference: BudgetFigures | None = None
    budgets: list[BudgetFigures] = field(default_factory=list)
    ingest: IngestFigures | None = None
    stopped_early: bool = False

    @property
    def recommendation(self) -> Recommendation:
        return recommend(self.budgets)

    def as_json(self) -> dict[str, Any]:
        recommendation = self.recommendation
        return {
            "collection": self.collection,
            "base_url": self.options.base_url,
            "budgets_ms": list(self.options.budgets),
            "concurrency": self.options.concurrency,
            "rounds": self.options.rounds,
            "queries": self.queries,
            "recall_k": RECALL_K,
            "latency_saved": "p99 of the unbounded run minus p99 at the budget",
            "reference": asdict(self.reference) if self.reference else None,
            "budgets": [asdict(figures) for figures in self.budgets],
            "ingest": (
                None
                if self.ingest is None
                else asdict(self.ingest) | {"rate_achieved": self.ingest.rate_achieved}
            ),
            "stopped_early": self.stopped_early,
            "rule": RULE,
            "recommendation": asdict(recommendation),
        }


def run_sweep(evaluation_set: EvaluationSet, options: SweepOptions) -> SweepReport:
    """The whole sweep, from making its tokens to removing what it made."""
    base_url = loopback_base_url(options.base_url)
    # httpx logs every request's URL at INFO, and these URLs carry the query text, which
    # never goes into our logs.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    queries, judgments = _judged_queries(evaluation_set)
    report = SweepReport(evaluation_set.name, options, len(queries))
    run_id = secrets.token_hex(4)
    token_name = f"sweep {evaluation_set.name} {run_id}"
    search_token = create_token(token_name, evaluation_set.source)
    audience = evaluation_set.source.audience
    stream = fresh_stream_source(audience) if options.ingest_rate > 0 else None
    try:
        stream_token = create_token(f"sweep stream {run_id}", stream) if stream else None
        asyncio.run(
            _sweep(
                base_url, audience, search_token, stream_token, run_id, queries, judgments, report
            )
        )
    finally:
        ApiToken.objects.filter(name=token_name).update(revoked=True)
        if stream is not None:
            if report.ingest is not None:
                report.ingest.embedded = ListingEmbedding.objects.filter(
                    listing__records__source=stream
                ).count()
            remove_stream(stream)
    return report


def _judged_queries(
    evaluation_set: EvaluationSet,
) -> tuple[dict[str, str], dict[str, set[str]]]:
    """The set's queries with at least one relevant document, and those documents."""
    judgments = evaluation_set.relevant_documents()
    texts = evaluation_set.queries.filter(external_id__in=list(judgments))
    return dict(texts.values_list("external_id", "text")), judgments


async def _sweep(
    base_url: str,
    audience: str,
    search_token: str,
    stream_token: str | None,
    run_id: str,
    queries: Mapping[str, str],
    judgments: Mapping[str, set[str]],
    report: SweepReport,
) -> None:
    options = report.options
    generation = await asyncio.to_thread(generations.active_generation, audience)
    client = _client(base_url, search_token, options.concurrency)
    stream_task: asyncio.Task[None] | None = None
    stop_stream = asyncio.Event()
    try:
        async with asyncio.timeout(options.max_seconds):
            # One pass first, not scored: the reference's latency is the one every budget
            # is compared with, and must not include loading the server's model, opening
            # its pool or reading the index into Postgres' buffers.
            await _ask_all(client, queries, UNBOUNDED_PARAMS, replace(options, rounds=1))
            if stream_token is not None:
                report.ingest = IngestFigures(options.ingest_rate)
                stream = IngestStream(
                    _client(base_url, stream_token, 1), report.ingest, run_id, options.stream_texts
                )
                stream_task = asyncio.create_task(stream.run(stop_stream))
            answers = await _ask_all(client, queries, UNBOUNDED_PARAMS, options)
            report.reference = budget_figures(UNBOUNDED.vector_budget_ms, answers, judgments, None)
            for budget in options.budgets:
                await asyncio.to_thread(fresh_start, generation.pk if generation else None)
                params = {"vector_budget_ms": f"{budget:g}"}
                answers = await _ask_all(client, queries, params, options)
                recall = report.reference.recall
                report.budgets.append(budget_figures(budget, answers, judgments, recall))
    except TimeoutError:
        report.stopped_early = True
    finally:
        if stream_task is not None:
            stop_stream.set()  # its last post finishes: see IngestStream.run
            if not (await asyncio.wait({stream_task}, timeout=REQUEST_TIMEOUT_S))[0]:
                stream_task.cancel()
                await asyncio.wait({stream_task})
        await client.aclose()


def _client(base_url: str, token: str, connections: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=REQUEST_TIMEOUT_S,
        limits=httpx.Limits(max_connections=connections),
        trust_env=False,  # a proxy from the environment would take requests off loopback
    )


async def _ask_all(
    client: httpx.AsyncClient,
    queries: Mapping[str, str],
    params: Mapping[str, str],
    options: SweepOptions,
) -> list[Answer]:
    """Every query, `options.rounds` times, by `options.concurrency` clients at once."""
    work: Iterator[tuple[int, str]] = (
        (number, query_id) for number in range(options.rounds) for query_id in queries
    )
    answers: list[Answer] = []

    async def client_loop() -> None:
        for number, query_id in work:  # shared: each item is taken by one loop
            answers.append(await _ask(client, query_id, queries[query_id], number, params))

    await asyncio.gather(*(client_loop() for _ in range(options.concurrency)))
    return answers


async def _ask(
    client: httpx.AsyncClient, query_id: str, text: str, number: int, params: Mapping[str, str]
) -> Answer:
    started = time.perf_counter()
    try:
        response = await client.get(SEARCH_PATH, params={"q": text, "k": str(RECALL_K), **params})
        body = response.json() if response.status_code in {200, 503} else {}
    except (httpx.HTTPError, json.JSONDecodeError):
        return Answer(query_id, number, (time.perf_counter() - started) * 1000, 0)
    return Answer(
        query_id,
        number,
        (time.perf_counter() - started) * 1000,
        response.status_code,
        mode=body.get("mode"),
        reasons=tuple(body.get("reasons", ())),
        documents=tuple(body.get("documents", ())),
    )


def cached_rankings_pattern(generation: int) -> str:
    """The keys of `generation`'s cached rankings."""
    return redis_keys.cached_rankings_of(generation)


def fresh_start(generation: int | None, sleep: Callable[[float], None] = time.sleep) -> None:
    """No cached ranking of `generation` and a closed evaluation breaker, as every budget
    starts with (see the module's docstring)."""
    redis = get_redis()
    if generation is not None:
        keys = list(redis.scan_iter(cached_rankings_pattern(generation), count=1000))
        if keys:
            redis.delete(*keys)
    was_closed = json.loads(redis.get(BREAKER_KEY) or '{"state": "closed"}')["state"] == "closed"
    keys = list(redis.scan_iter(f"{BREAKER_KEY}*", count=1000))
    if keys:
        redis.delete(*keys)
    if not was_closed:
        # A web process that saw it open refuses without asking Redis until its cool-down
        # ends (resilience.shared_breaker): only then does it read the state, now closed.
        sleep(policy_from_settings("VECTOR_BREAKER").cooldown_s + BREAKER_SETTLE_S)
