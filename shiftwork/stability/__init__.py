"""The stability study: per-prompt stability of a model's behaviour under meaning-preserving variants."""
