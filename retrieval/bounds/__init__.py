"""What bounds a search's work: when it arrived (`arrival`), the front door that sheds
before Django (`door`), its deadline and the stages' budgets (`deadline`, checked at
start-up by `checks`), the limit on vector searches in flight (`admission`) and the
vector breaker as the event loop asks it (`breaker_gate`)."""
