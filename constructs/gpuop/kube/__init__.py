"""Kubernetes-shaped value types and conventions shared by every stage: value slots, kind order, YAML io."""
