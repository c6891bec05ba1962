"""MIG: the placement checker over the MIG catalog (geometry.py; the catalog itself is catalog/mig.py) and
the pictures of a layout (picture.py, terminal and SVG)."""
