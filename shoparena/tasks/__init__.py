"""Problems: the schema, loaders (upstream JSONL, ORO suites), the offline generator, constraint predicates."""
