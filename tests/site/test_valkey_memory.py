"""Valkey's memory is bounded and the cache gives way first (searchsite/embedded/valkey.py,
docker-compose.yml): at the cap the least recently used key with a time to live is evicted
(cached rankings, sessions), never one without (Celery's queues, the breaker's state)."""

from pathlib import Path

import redis

from tests.private_services import private_valkey


def test_at_the_cap_cached_entries_go_and_the_queue_stays(tmp_path: Path) -> None:
    with private_valkey(tmp_path) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "volatile-lru"}
        assert client.config_get("maxmemory") == {"maxmemory": str(256 * 1024 * 1024)}
        client.rpush("embedding", *[f"task {n}" for n in range(100)])  # a queue: no TTL
        # The cap lowered to just above what is used now, then cached rankings written
        # past it (the configured 256 MB would take far longer to fill).
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + 2 * 1024 * 1024)
        ranking = b"x" * 10_000
        for n in range(1_000):  # 10 MB of rankings into 2 MB of room
            client.set(f"searchsite:results:{n}", ranking, ex=86_400)
        assert int(client.info("stats")["evicted_keys"]) > 0
        assert client.llen("embedding") == 100
        assert client.exists("searchsite:results:999")  # the newest are kept
