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


def test_a_share_that_may_be_none_takes_zero_and_no_less(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SHARE", "0")
    assert env_share("SOME_SHARE", 0.25, none=True) == 0.0
    monkeypatch.setenv("SOME_SHARE", "-0.5")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_share("SOME_SHARE", 0.25, none=True)


@pytest.mark.parametrize(
    ("name", "value"),
    [("EMBED_IDLE_SHARE", "0"), ("INGEST_BUSY_SHARE", "0"), ("EMBED_BUSY_SHARE", "-0.5")],
)
def test_the_pacers_shares_are_refused_at_start_up_outside_their_bounds(
    name: str, value: str
) -> None:
    """A share of 0 would otherwise surface as a ZeroDivisionError in a sweep, later (the
    vectors' busy share may be 0: none, the floor alone)."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import searchsite.settings"],
        cwd=REPO,
        env={**os.environ, name: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode != 0
    assert f"{name}={float(value)!r} is not a share" in loaded.stderr
