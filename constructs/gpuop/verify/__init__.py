"""Checks of compiled output (`gpuop validate DIST`), not of input (that is validate/): built-in kinds
against kubernetes-validate's strict schemas (kubeschema.py), custom kinds against their upstream CRDs
(crdschema.py) with their CEL rules (cel.py), gathered for a dist/ tree by output.py."""
