"""Offline validation of compiled Kubernetes objects (built-in kinds and CRD-backed kinds)."""
