"""The arena: sandboxed evaluation, the reasoning judge, the validator loop (and, later, identities, submissions,
races, weights and the chain)."""
