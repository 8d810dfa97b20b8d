"""Bearer tokens for the editorial API."""

import hashlib
import secrets

from ingestion.models import ApiToken, Source


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(name: str, source: Source) -> str:
    token = secrets.token_urlsafe(32)
    ApiToken.objects.create(name=name, source=source, token_hash=_digest(token))
    return token


def source_for_token(token: str) -> Source | None:
    api_token = (
        ApiToken.objects.select_related("source")
        .filter(token_hash=_digest(token), revoked=False)
        .first()
    )
    return api_token.source if api_token else None
