"""Settings from the environment fail loudly at start-up on a value that cannot work."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from searchsite.env import env_share

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("raw", "share"), [(None, 0.25), ("0.5", 0.5), ("1", 1.0)])
def test_a_share_of_the_time_is_read_within_its_bounds(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, share: float
) -> None:
    if raw is None:
        monkeypatch.delenv("SOME_SHARE", raising=False)
    else:
        monkeypatch.setenv("SOME_SHARE", raw)
    assert env_share("SOME_SHARE", 0.25) == share


@pytest.mark.parametrize("raw", ["0", "-0.5", "1.5", "half"])
def test_a_share_that_would_divide_by_zero_or_rest_backwards_is_refused(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("SOME_SHARE", raw)
    with pytest.raises(ImproperlyConfigured, match="SOME_SHARE"):
        env_share("SOME_SHARE", 0.25)


@pytest.mark.parametrize("name", ["EMBED_BUSY_SHARE", "EMBED_IDLE_SHARE", "INGEST_BUSY_SHARE"])
def test_the_pacers_shares_are_refused_at_start_up_outside_their_bounds(name: str) -> None:
    """A share of 0 would otherwise surface as a ZeroDivisionError in a sweep, later."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import searchsite.settings"],
        cwd=REPO,
        env={**os.environ, name: "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode != 0
    assert f"{name}=0.0 is not a share" in loaded.stderr
