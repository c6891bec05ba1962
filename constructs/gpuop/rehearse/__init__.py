"""Rehearsal: apply a compiled cluster to a real Kubernetes control plane whose GPU nodes are simulated (kwok).

rig.py builds and runs the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
kwok, nfd-master) on loopback.
"""
