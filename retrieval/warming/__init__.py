"""Cache warming: after a search's vector stage timed out, a worker runs the same search
with a generous budget so that the next asker of that query finds its complete ranking
cached. `schedule` queues it (one task per cache key, a bounded queue, the query kept out
of the broker); `run` is what the task does. Not start-up: a process or a stack warms up
before it takes traffic in retrieval/warm_up.py."""
