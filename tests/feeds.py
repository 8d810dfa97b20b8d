"""Feeds written for tests."""

from xml.sax.saxutils import escape


def rss(items: list[tuple[str, str, str]]) -> bytes:
    """An RSS 2.0 feed of (guid, title, description) items."""
    body = "".join(
        f"<item><guid>{escape(guid)}</guid><title>{escape(title)}</title>"
        f"<description>{escape(description)}</description></item>"
        for guid, title, description in items
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
        f"<title>Test feed</title><link>https://feed.example/</link>{body}</channel></rss>"
    ).encode()


def numbered_rss(count: int, version: str) -> bytes:
    """`count` items g0, g1, ... whose descriptions name `version`: a second version of
    the feed changes every item, so a poll of it updates them all."""
    return rss([(f"g{n}", f"Event number {n}", f"Details {version}") for n in range(count)])
