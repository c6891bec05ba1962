"""Project settings (gpuop.yaml beside profiles/): where dist/ lives in git, for Argo CD and Flux.

```yaml
apiVersion: gpuop/v1alpha1
kind: Settings
gitops:
  repoURL: https://git.example.com/platform/gpu-clusters.git   # required
  revision: main            # branch the engines follow. Omitted: main
  path: dist                # dist/ inside the repository. Omitted: dist
  argocd: {namespace: argocd, project: default, server: https://kubernetes.default.svc}
  flux: {namespace: flux-system, interval: 10m}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuop.errors import Issue, UserError
from gpuop.profile.load import Positions, display


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArgoSettings(_M):
    namespace: str = Field("argocd", description="Where Argo CD runs. Omitted: argocd.")
    project: str = Field("default", description="AppProject of the Applications. Omitted: default.")
    server: str = Field("https://kubernetes.default.svc", description=(
        "Destination API server. Omitted: the cluster Argo CD runs in (one Argo CD per GPU cluster)."))


class FluxSettings(_M):
    namespace: str = Field("flux-system", description="Where Flux runs. Omitted: flux-system.")
    interval: str = Field("10m", pattern=r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$", description="Omitted: 10m.")
    source: Literal["git", "oci"] = Field("git", description=(
        "Where the HelmRelease takes the chart from: git (the chart folder in this repository) or oci (the "
        "archives `gpuop publish --oci` pushed; set `oci`). Omitted: git."))
    oci: str | None = Field(None, pattern=r"^oci://[^\s]+$", description=(
        "oci://HOST/PATH the charts are published to; required with source: oci. Omitted: none."))

    @model_validator(mode="after")
    def _oci_needs_url(self):
        if self.source == "oci" and not self.oci:
            raise ValueError("source: oci needs `oci: oci://HOST/PATH` (where gpuop publish pushes the charts)")
        return self


class GitOps(_M):
    repoURL: str = Field(min_length=1, description="Git repository holding dist/. Required.")
    revision: str = Field("main", description="Branch or tag the engines follow. Omitted: main.")
    path: str = Field("dist", pattern=r"^[A-Za-z0-9._/-]+$", description="dist/ inside the repo. Omitted: dist.")
    argocd: ArgoSettings = Field(default_factory=ArgoSettings)
    flux: FluxSettings = Field(default_factory=FluxSettings)


class Settings(_M):
    apiVersion: Literal["gpuop/v1alpha1"]
    kind: Literal["Settings"]
    gitops: GitOps


def load_settings(path: Path) -> Settings:
    from pydantic import ValidationError

    from gpuop.profile.load import read_document
    from gpuop.profile.messages import model_issues

    shown = display(path)
    hint = "gpuop needs gitops.repoURL (where dist/ lives in git); create gpuop.yaml or pass --settings FILE"
    if path.is_dir():
        raise UserError(Issue(shown, 0, 0, "", f"settings file is a folder, not a file; {hint}"))
    if not path.is_file():
        raise UserError(Issue(shown, 0, 0, "", f"settings file not found; {hint}"))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(Issue(shown, 0, 0, "", f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})"))
    except OSError as exc:
        raise UserError(Issue(shown, 0, 0, "", f"cannot read: {exc.strerror or exc}"))
    data, table = read_document(shown, text, "the settings file")
    pos = Positions(shown, table)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise UserError(model_issues(exc, data, pos, Settings))
