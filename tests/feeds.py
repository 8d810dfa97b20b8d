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
