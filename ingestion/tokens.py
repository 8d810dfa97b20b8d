"""Bearer tokens for the editorial API: stored as digests, checked on every request.

Invariants a change must keep:
  - the token itself is never stored: `ApiToken.token_hash` holds its SHA-256, and the
    token is shown once, to whoever created it (the command, or the admin's add page);
  - a token is checked against the database on every request, never cached, so a
    revoked one is refused from the next request on.
"""

import hashlib
import hmac
import secrets

from ingestion.models import ApiToken, Source


def digest(token: str) -> str:
    """What `ApiToken.token_hash` keeps of a token: never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(api_token: ApiToken) -> str:
    """A new token for `api_token` (unsaved, or saved again by the caller): its digest
    goes on the row, the token to the caller, who shows it once."""
    token = secrets.token_urlsafe(32)
    api_token.token_hash = digest(token)
    return token


def create_token(name: str, source: Source) -> str:
    api_token = ApiToken(name=name, source=source)
    token = issue_token(api_token)
    api_token.save()
    return token


def source_for_token(token: str) -> Source | None:
    """The source a live token posts to; None for a revoked, unknown or empty one."""
    presented = digest(token)
    api_token = (
        ApiToken.objects.select_related("source")
        .filter(token_hash=presented, revoked=False)
        .first()
    )
    # Looking the digest up is no timing oracle: how long the index takes to find (or
    # miss) a digest tells a caller about the digest of the token they sent, and they
    # can't work back from a digest to a token that has it. The comparison here keeps
    # it so whatever the lookup becomes (a column collation that folds case, a lookup
    # by a prefix), and costs nothing beside the query.
    if api_token is None or not hmac.compare_digest(api_token.token_hash, presented):
        return None
    return api_token.source
