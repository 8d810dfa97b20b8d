"""What operators watch, above the domain: the ops page (its state, its history and
charts), the per-minute roll-ups of every process's metrics that the history reads and
their writer, and the latest recall guardrail. It reads `ingestion`, `retrieval` and
`evaluation`; none of them imports it (tests/test_layering.py)."""
