"""Bearer tokens for the editorial API."""

import hashlib
import secrets

from ingestion.models import ApiToken, Source


def digest(token: str) -> str:
    """What `ApiToken.token_hash` keeps of a token: never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(name: str, source: Source) -> str:
    token = secrets.token_urlsafe(32)
    ApiToken.objects.create(name=name, source=source, token_hash=digest(token))
    return token


def source_for_token(token: str) -> Source | None:
    api_token = (
        ApiToken.objects.select_related("source")
        .filter(token_hash=digest(token), revoked=False)
        .first()
    )
    return api_token.source if api_token else None
