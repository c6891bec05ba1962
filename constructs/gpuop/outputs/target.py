"""What every per-cluster writer is given and gives back, and the cluster's output folders, spelled here once.

A writer is `write(t: Target) -> Written`: its files (paths relative to dist/) and its part of the cluster's
index.json entry. outputs/cluster.py `build_cluster` chooses the delivery up front (gpuop's own stack, or
NVIDIA's operator: `spec.delivery.mode`) and calls each writer once; each writes its own files where `t.folders`
says, so no writer's files are moved or dropped afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuop.kube.folders import ADDONS, ENTRY_FOLDERS, FLUX_OVERLAY, PREVIEW

STACK, OPERATOR = "stack", "operator"           # the deliveries (`spec.delivery.mode`)


@dataclass(frozen=True)
class Folders:
    """A cluster's output folders, relative to dist/. In operator mode the operands gpuop would render go under
    `preview/` (no Argo CD, Flux or Kustomize object gpuop writes points there: outputs/operator.py) and there is
    no `flux-overlay/`."""
    cluster: str
    delivery: str = STACK

    def _operand(self, name: str) -> str:
        return f"{self.cluster}/{PREVIEW}/{name}" if self.delivery == OPERATOR else f"{self.cluster}/{name}"

    @property
    def chart(self) -> str:
        return self._operand("chart")

    @property
    def manifests(self) -> str:
        return self._operand("manifests")

    @property
    def overlay(self) -> str:
        return self._operand("overlay")

    @property
    def argocd(self) -> str:
        return f"{self.cluster}/argocd"

    @property
    def flux(self) -> str:
        return f"{self.cluster}/flux"

    @property
    def flux_overlay(self) -> str | None:
        return None if self.delivery == OPERATOR else f"{self.cluster}/{FLUX_OVERLAY}"

    @property
    def params(self) -> str:
        return f"{self.cluster}/params"

    @property
    def operator(self) -> str:
        return f"{self.cluster}/operator"

    @property
    def addons(self) -> str:
        """Operator mode: gpuop's own objects beside NVIDIA's operator, delivered (outputs/addons.py)."""
        return f"{self.cluster}/{ADDONS}"

    def entry(self) -> dict:
        """The folders as the index.json entry names them."""
        out = {k: getattr(self, k) for k in ENTRY_FOLDERS}
        if self.flux_overlay is not None:
            out["fluxOverlay"] = self.flux_overlay
        return out


@dataclass(frozen=True)
class Target:
    """One cluster as every writer sees it: the synthesized stack (its plan inside), the settings' gitops section
    and where its files go."""
    stack: object                        # stack/objects.Synthesized
    gitops: object                       # profile/settings.GitOps
    folders: Folders
    signing: object = None               # profile/settings.Signing: the charts are signed (Flux verifies them)

    @property
    def plan(self):
        return self.stack.plan

    @property
    def name(self) -> str:
        return self.folders.cluster

    def identity(self) -> dict:
        """The index.json entry's facts of the cluster itself (not of any one output)."""
        plan = self.plan
        return {"name": plan.name, "releaseName": plan.name, "namespace": plan.namespace, "platform": plan.platform,
                "platformVersion": plan.platform_version, "kubeVersion": plan.kube_version,
                "stackRelease": plan.release, "labels": dict(plan.labels)}

    def repo_path(self, folder: str) -> str:
        """A folder of dist/ as the GitOps engines find it in the repository (gitops.path)."""
        return f"{self.gitops.path.rstrip('/')}/{folder}"


@dataclass(frozen=True)
class Written:
    files: dict = field(default_factory=dict)    # path relative to dist/ -> text
    entry: dict = field(default_factory=dict)    # its keys of the cluster's index.json entry
