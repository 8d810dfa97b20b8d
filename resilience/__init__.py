"""What both sides share to stay fast when a dependency stalls: the circuit breaker (its
state machine, and that state shared through Redis) and Redis clients that fail fast.

Below `ingestion` and `retrieval`, which both use it; it imports neither of them nor the
project package `searchsite`, which wires everything together on top
(tests/test_layering.py)."""
