"""MIG: the geometry catalog, the placement checker, and the pictures (terminal and SVG)."""
