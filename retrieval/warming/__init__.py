"""Warming, and warming up. Cache warming: after a search's vector stage timed out, a
worker runs the same search with a generous budget so that the next asker of that query
finds its complete ranking cached. `schedule` queues it (one task per cache key, a bounded
queue, the query kept out of the broker); `run` is what the task does, on an event loop
kept for a worker's tasks (`kept_loop`). Warm-up (`warm_up`) is start-up's: a process or a
stack reads what its first searches need before it takes traffic."""
