"""Sequencing: load -> validate -> plan -> synthesize -> package -> write; workers, shards, cache."""
