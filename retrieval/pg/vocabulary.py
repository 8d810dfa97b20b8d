"""The lexical stage's vocabulary and statistics, materialized views refreshed in the
background: the words of active listings' titles, venues and aliases behind spelling
correction; each lexeme's document frequency per audience, and each audience's listings
and their average lengths, behind BM25 (retrieval/pg/lexical.py). Words of listings added
since the last refresh are corrected to only after the next one, and weigh as the rarest
terms until then; they are still found by full-text search at once."""

from retrieval.pg import views

VIEWS = ("retrieval_vocabulary", "retrieval_term_statistics", "retrieval_corpus_statistics")


def refresh() -> None:
    views.refresh(VIEWS)
