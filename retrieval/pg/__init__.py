"""Everything the search says to Postgres: the pool of async connections (`pool`, with
`checkout`), one statement under the request's deadline (`statement`), and the statements
themselves: the lexical and vector stages (`lexical`, `vector`), the listings a page
shows (`hydrate`), the active generation (`generation`), and the refresh of the lexical
stage's vocabulary (`vocabulary`)."""
