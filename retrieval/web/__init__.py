"""The search over HTTP, thin: the JSON API (`api`, its bodies' types in `api_types`) and
the progressive page (`page`, what its templates are given in `page_context`), routed by
`urls`. Each parses the request, runs the search (retrieval/search.py) and writes the
answer."""
