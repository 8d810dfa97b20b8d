"""Judged-query evaluation of the search paths."""
