"""Products: the schema, loaders, the synthetic generator, the BM25 search index and its HTTP service."""
