"""Project settings (gpuop.yaml beside profiles/): where dist/ lives in git, for Argo CD and Flux.

```yaml
apiVersion: gpuop/v1alpha1
kind: Settings
gitops:
  repoURL: https://git.example.com/platform/gpu-clusters.git   # required
  revision: main            # branch the engines follow. Omitted: main
  # or, instead of revision, exactly one of: ref: {branch: main} | {tag: v1.2.0} | {semver: ">=1.2.0 <2.0.0"}
  #                                          | {commit: <40 or 64 hex digits>}
  path: dist                # dist/ inside the repository. Omitted: dist
  argocd: {namespace: argocd, project: default, server: https://kubernetes.default.svc}
  flux: {namespace: flux-system, interval: 10m}
signing:                    # optional: `gpuop publish --oci --sign-key FILE` signs, Flux verifies (spec.verify)
  publicKeySecret: cosign-pub   # the Secret in Flux's namespace with the public key (cosign.pub)
  passwordEnv: COSIGN_PASSWORD  # the environment variable with the private key's password
```

Every string is checked before it reaches an object or a command line: URLs by scheme (Git: https, http,
ssh, git or scp-like user@host:path; the Argo CD server: https or http; OCI: oci://) and by a URL
grammar (an ASCII/IDNA host, a port in 1..65535, no credentials, no leading '-', no '{', '}' or '$'
that the ApplicationSet's Go templates or Flux's substitution would read, at most 2048 characters),
`flux.interval` as a Go duration from 1s to 8760h (Go's own limit is ~2562047h), git revisions by
`git check-ref-format`'s rules (no spaces, ';', leading '-', '..', control characters), namespaces and
the AppProject name by the Kubernetes name rules, `path` as a relative path without '..'.

`revision` is a branch (Flux GitRepository `spec.ref.branch`, Argo CD `targetRevision`); `ref` says
what kind of git ref it is, so a tag becomes `ref.tag` and a commit `ref.commit` in Flux (Flux treats
`ref.branch: v1.2.0` as a branch named v1.2.0 and fails). A semver range needs Argo CD >= 2.11
(argoproj/argo-cd#17566, semver resolution of git tags).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from gpuop.kube.types import dns_label, dns_subdomain
# the URL grammar, shared with the profile's URL fields (profile/grammar.py)
from gpuop.profile.grammar import _CONTROL, MAX_URL, url as _url, url_problem  # noqa: F401

from gpuop.errors import Issue, UserError
from gpuop.profile.load import Positions, display


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# the URL grammar shared with the profile's URL fields (profile/grammar.py)
from gpuop.profile.grammar import MAX_URL, url as _url, url_problem  # noqa: E402,F401


# Go's time.ParseDuration: the units and the int64 nanosecond range; Flux reads every interval with it
_GO_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 10 ** 9, "m": 60 * 10 ** 9, "h": 3600 * 10 ** 9}
GO_DURATION_MAX_NS = 2 ** 63 - 1
INTERVAL_BOUNDS = (10 ** 9, 8760 * 3600 * 10 ** 9)     # 1s .. 8760h (a year): shorter hammers the git host


def go_duration_ns(v: str) -> int | None:
    """Nanoseconds of a Go duration string (no sign), or None when time.ParseDuration refuses it."""
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", v)
    if not parts or "".join(n + u for n, u in parts) != v:
        return None
    from fractions import Fraction

    total = sum(Fraction(n) * _GO_UNITS[u] for n, u in parts)
    return int(total) if total <= GO_DURATION_MAX_NS else None


def _interval(v: str) -> str:
    ns = go_duration_ns(v) if len(v) <= 64 else None
    if ns is None:
        raise ValueError(f"{v[:64]!r} is not a Go duration within Go's range (at most 2562047h47m16.854775807s), "
                         "e.g. 10m, 1h30m")
    lo, hi = INTERVAL_BOUNDS
    if not lo <= ns <= hi:
        raise ValueError(f"{v!r} is outside 1s..8760h; allowed: an interval from 1s to 8760h, e.g. 10m")
    return v


def git_ref_problem(v: str) -> str | None:
    """git check-ref-format's rules for one ref name (plus: no leading '-', so it is never an option)."""
    if not v or len(v) > 255:
        return "must be 1 to 255 characters"
    if v.startswith("-"):
        return "must not start with '-' (it would be read as an option)"
    if _CONTROL.search(v) or re.search(r"[~^:?*\[\\;'\"`$&|<>(){}]", v):
        return "holds a space, control character or one of ~ ^ : ? * [ \\ ; ' \" ` $ & | < > ( ) { }"
    if ".." in v or "@{" in v or "//" in v or v.endswith((".", "/", ".lock")) or v.startswith("/") or v == "@" \
            or any(part.startswith(".") for part in v.split("/")):
        return "is not a git ref name (no '..', '@{', '//', leading '/', components starting with '.', trailing '.', '/' or '.lock')"
    return None


def _git_ref(v: str) -> str:
    problem = git_ref_problem(v)
    if problem:
        raise ValueError(f"{v!r} {problem}")
    return v


def _semver_range(v: str) -> str:
    # Masterminds/semver constraints, which Flux and Argo CD both use: versions, x/* wildcards, operators
    if not re.fullmatch(r"[0-9A-Za-z.*^~<>=!|, +-]{1,128}", v) or v.startswith("-") or not re.search(r"[0-9*xX]", v):
        raise ValueError(f"{v!r} is not a semver range; allowed: versions with operators, e.g. "
                         "\">=1.2.0 <2.0.0\", \"~1.2\", \"1.x\"")
    return v


def _relative_path(v: str) -> str:
    if v.startswith("/") or ".." in v.split("/") or "//" in v:
        raise ValueError(f"{v!r} must be a relative path inside the repository, without '..' or '//'")
    return v


GitRefName = Annotated[str, AfterValidator(_git_ref)]
Namespace = Annotated[str, AfterValidator(dns_label(63))]


class GitRef(_M):
    """Exactly one of branch, tag, semver, commit: what kind of git ref the engines follow."""
    branch: GitRefName | None = Field(None, description="A branch: Flux ref.branch. Omitted: not a branch.")
    tag: GitRefName | None = Field(None, description="A tag: Flux ref.tag. Omitted: not a tag.")
    semver: Annotated[str, AfterValidator(_semver_range)] | None = Field(None, description=(
        "A semver range over the tags: Flux ref.semver (Argo CD >= 2.11 resolves it too). Omitted: not a range."))
    commit: str | None = Field(None, pattern=r"^([0-9a-f]{40}|[0-9a-f]{64})$", description=(
        "A full commit SHA (40 or 64 lowercase hex digits): Flux ref.commit. Omitted: not a commit."))

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [k for k in ("branch", "tag", "semver", "commit") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("set exactly one of branch, tag, semver, commit" +
                             (f" (got {', '.join(given)})" if given else ""))
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("branch", "tag", "semver", "commit") if getattr(self, k) is not None)

    @property
    def value(self) -> str:
        return getattr(self, self.kind)


class ArgoSettings(_M):
    namespace: Namespace = Field("argocd", description="Where Argo CD runs. Omitted: argocd.")
    project: Annotated[str, AfterValidator(dns_subdomain)] = Field("default", description=(
        "AppProject of the Applications. Omitted: default."))
    server: Annotated[str, AfterValidator(_url(("https", "http")))] = Field("https://kubernetes.default.svc", description=(
        "Destination API server of the per-cluster Applications whose profile names no "
        "spec.delivery.destination. Omitted: the cluster Argo CD runs in (one Argo CD per GPU cluster)."))
    repositorySecret: Annotated[str, AfterValidator(dns_subdomain)] | None = Field(None, description=(
        "The repository Secret or credential template (label argocd.argoproj.io/secret-type: repository or "
        "repo-creds) you keep in Argo CD's namespace with the credentials of repoURL, by name. Argo CD finds "
        "credentials by URL, so gpuop writes no Secret and no credential anywhere: the name is listed in "
        "index.json and `gpuop report` as what the hub must hold. Omitted: none (a public repository)."))


class FluxSettings(_M):
    namespace: Namespace = Field("flux-system", description="Where Flux runs. Omitted: flux-system.")
    interval: Annotated[str, AfterValidator(_interval)] = Field("10m", pattern=r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$", description=(
        "How often Flux checks the source and the releases: a Go duration from 1s to 8760h. Omitted: 10m."))
    source: Literal["git", "oci"] = Field("git", description=(
        "Where the HelmRelease takes the chart from: git (the chart folder in this repository) or oci (the "
        "archives `gpuop publish --oci` pushed; set `oci`). Omitted: git."))
    oci: Annotated[str, AfterValidator(_url(("oci",)))] | None = Field(None, pattern=r"^oci://[^\s]+$", description=(
        "oci://HOST/PATH the charts are published to; required with source: oci. Omitted: none."))
    secretRef: Annotated[str, AfterValidator(dns_subdomain)] | None = Field(None, description=(
        "A Secret in Flux's namespace, by name, with the credentials of the source of dist/ (the git repository: "
        "username/password or identity/known_hosts; the OCI registry with source: oci: .dockerconfigjson), set as "
        "spec.secretRef of the GitRepository `gpuop` or the OCIRepository. gpuop never reads it. Omitted: no "
        "secretRef (a public source)."))

    @model_validator(mode="after")
    def _oci_needs_url(self):
        if self.source == "oci" and not self.oci:
            raise ValueError("source: oci needs `oci: oci://HOST/PATH` (where gpuop publish pushes the charts)")
        return self


class GitOps(_M):
    repoURL: Annotated[str, AfterValidator(_url(("https", "http", "ssh", "git"), scp=True))] = Field(
        min_length=1, description="Git repository holding dist/. Required.")
    revision: GitRefName = Field("main", description=(
        "Branch the engines follow (for a tag, range or commit use `ref`). Omitted: main."))
    ref: GitRef | None = Field(None, description=(
        "Instead of revision: {branch: X}, {tag: X}, {semver: RANGE} or {commit: SHA}. Omitted: revision, a branch."))
    path: Annotated[str, AfterValidator(_relative_path)] = Field(
        "dist", pattern=r"^[A-Za-z0-9._/-]+$", description="dist/ inside the repo. Omitted: dist.")
    argocd: ArgoSettings = Field(default_factory=ArgoSettings)
    flux: FluxSettings = Field(default_factory=FluxSettings)

    @model_validator(mode="before")
    @classmethod
    def _revision_or_ref(cls, data):
        if isinstance(data, dict) and "revision" in data and "ref" in data:
            raise ValueError("revision and ref are exclusive: revision names a branch, ref says which kind of ref; "
                             "keep one")
        return data

    @model_validator(mode="after")
    def _revision_follows_ref(self):
        # consumers that only need the string (Argo CD targetRevision, the ApplicationSet's git generator)
        # keep reading `revision`; frozen model, so set it once here, before anyone can see the object
        if self.ref is not None:
            object.__setattr__(self, "revision", self.ref.value)
        return self

    @property
    def flux_ref(self) -> dict:
        """Flux GitRepository spec.ref: the field named by the kind of ref (branch when only revision is set)."""
        return {self.ref.kind: self.ref.value} if self.ref is not None else {"branch": self.revision}


class Signing(_M):
    """Chart signing with cosign: `gpuop publish --oci --sign-key FILE` signs each chart it pushes, and the Flux
    OCIRepository of every cluster verifies it (spec.verify). The private key and its password never live in
    the repository: the key file is named on the command line, its password is read from an environment
    variable this block names."""
    provider: Literal["cosign"] = Field("cosign", description=(
        "The signature format: cosign's (sigstore), keyed and offline (no transparency log, no Fulcio). "
        "Omitted: cosign."))
    publicKeySecret: Annotated[str, AfterValidator(dns_subdomain)] = Field(description=(
        "A Secret in Flux's namespace, by name, holding the cosign public key(s) (keys ending in .pub), set as "
        "spec.verify.secretRef of every OCIRepository gpuop writes. gpuop never reads it. Required."))
    passwordEnv: str = Field("COSIGN_PASSWORD", pattern=r"^[A-Z_][A-Z0-9_]{0,127}$", description=(
        "The environment variable holding the private key's password when `gpuop publish --sign-key` signs "
        "(unset: an unencrypted key). Omitted: COSIGN_PASSWORD."))


class Settings(_M):
    apiVersion: Literal["gpuop/v1alpha1"]
    kind: Literal["Settings"]
    gitops: GitOps
    signing: Signing | None = Field(None, description=(
        "Chart signing: the charts `gpuop publish --oci` pushes are signed and Flux verifies them. Omitted: "
        "charts are published unsigned and no OCIRepository carries spec.verify."))


def load_settings(path: Path) -> Settings:
    from pydantic import ValidationError

    from gpuop.profile.load import decode, read_bytes, read_document

    shown = display(path)
    hint = "gpuop needs gitops.repoURL (where dist/ lives in git); create gpuop.yaml or pass --settings FILE"
    if path.is_dir():
        raise UserError(Issue(shown, 0, 0, "", f"settings file is a folder, not a file; {hint}"))
    if not path.is_file():
        raise UserError(Issue(shown, 0, 0, "", f"settings file not found; {hint}"))
    text = decode(shown, read_bytes(path, shown))
    data, table = read_document(shown, text, "the settings file")
    pos = Positions(shown, table)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        from gpuop.profile.messages import model_issues   # the profile's models: loaded only to word an error

        raise UserError(model_issues(exc, data, pos, Settings))
