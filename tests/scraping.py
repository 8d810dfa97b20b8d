"""Reading GET /metrics in tests: counters are process-wide, so a test compares a scrape
after what it caused with one before."""

from django.test import AsyncClient, Client
from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One /metrics answer: sample name and labels -> value (0 for a series not yet seen)."""

    def __init__(self, text: str) -> None:
        self.samples = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def since(self, before: "Scrape", name: str, **labels: str) -> float:
        return self.value(name, **labels) - before.value(name, **labels)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every series of `name` that has `labels`, whatever its others."""
        wanted = labels.items()
        return sum(
            value
            for (sample, series), value in self.samples.items()
            if sample == name and wanted <= series
        )

    def total_since(self, before: "Scrape", name: str, **labels: str) -> float:
        return self.total(name, **labels) - before.total(name, **labels)

    def split_since(self, before: "Scrape", name: str, label: str) -> dict[str, float]:
        """What each value of `label` added to `name` since `before` (the nonzero ones)."""
        values = {dict(series)[label] for sample, series in self.samples if sample == name}
        split = {value: self.total_since(before, name, **{label: value}) for value in values}
        return {value: added for value, added in split.items() if added}


async def scrape(client: AsyncClient) -> Scrape:
    response = await client.get("/metrics")
    assert response.status_code == 200
    return Scrape(response.content.decode())


def scrape_sync(client: Client) -> Scrape:
    response = client.get("/metrics")
    assert response.status_code == 200
    return Scrape(response.content.decode())
