"""What a search is asked: its text, `k` and page (`parse`), its filters and the SQL they
add to each stage (`filters`, with the date window read by `dates`), and the text's
embedding (`embedder`)."""
