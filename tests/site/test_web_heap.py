"""A web process puts what it loaded before serving out of the garbage collector's reach:
walked by every full collection, that heap stopped the event loop, and every search in
flight with it, for up to 217 ms at a time under load (docs/reliability.md)."""

import subprocess
import sys

from searchsite import embedded

# Django, the URLconf's modules and the query model's session: some 140,000 objects.
LOADED_AT_LEAST = 50_000


def test_the_web_application_freezes_the_heap_it_loaded(child_env: dict[str, str]) -> None:
    probe = "import gc, searchsite.asgi; print(gc.get_freeze_count())"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=child_env,
        cwd=embedded.REPO_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert int(done.stdout.split()[-1]) >= LOADED_AT_LEAST
