"""Stage 6, package: synthesized objects -> every file of dist/. Outputs see synthesized objects and the
plan model, never profiles, validation or components.

- cluster.py: one cluster's files (`build_cluster`) and the whole tree (`assemble`: chart versions from
  the lock, packages, index.json); manifests.py, helm.py + values.py (the chart and its values contract),
  kustomize.py, node_labels.py.
- argocd.py, flux.py (per cluster), fleet.py (ApplicationSet, AppProject, health checks), drift.py and
  health.py (what the GitOps engines must ignore and how they judge health).
- charts.py (chart archives and the repository index), version.py (chart versions from content).
"""
