"""Stage 2, validate: every rule a small named function, gathered by one runner."""
