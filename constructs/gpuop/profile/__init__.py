"""Cluster profiles: the declarative input (models) and how it is read (load)."""
