"""`gpuop images`: every image a cluster runs, and `gpuop images resolve --registry URL`: a digest lock
filled from a registry, for air-gapped and pinned sites.

- List: the profiles are compiled in-process (validate, plan, synthesize) and the container images of
  their rendered manifests printed per cluster, exactly what synth writes to dist/<cluster>/images.txt.
- Resolve: for every image the clusters' plans use (StackPlan.image_keys: <path>:<tag> below the
  registry), the registry's manifest for <registry path>/<path>:<tag> is fetched over the Docker
  Registry HTTP API v2 (`GET /v2/<name>/manifests/<tag>`, Accept: OCI index / manifest and Docker
  manifest list / v2) and its digest taken as sha256 of the bytes served (the registry's
  Docker-Content-Digest must agree). An anonymous bearer token is fetched when the registry asks for one
  (WWW-Authenticate: Bearer realm=...). The lock (kind ImageDigests) keeps entries of other images, so
  one lock can serve several profiles; keys are below the registry, so the digests hold in any mirror.
  A profile pins with spec.images.digestLock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from gpuop.errors import Issue, UserError

LOCK_KIND = "ImageDigests"        # plan/build.py read_lock reads what this writes
ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"))
TIMEOUT = 30


def _plans(paths: list[Path]):
    from gpuop.pipeline.run import plan_all

    plans, _warnings = plan_all(paths)
    return plans


def _unpinned_plans(paths: list[Path]):
    """The profiles' plans with spec.images.digestLock ignored: resolve fills the lock a pinned profile
    needs, so it must plan before the lock exists (or while it lacks a new image)."""
    from gpuop import catalog
    from gpuop.plan.build import build_plan
    from gpuop.profile.load import discover, load_profile
    from gpuop.validate.runner import validate

    cat = catalog.load()
    plans, issues = [], []
    for f in discover(paths):
        try:
            valid = validate(load_profile(f), cat)
        except UserError as exc:
            issues += exc.issues
            continue
        spec = valid.profile.spec
        unpinned = spec.model_copy(update={"images": spec.images.model_copy(update={"digestLock": None})})
        plans.append(build_plan(dataclasses.replace(valid, profile=valid.profile.model_copy(update={"spec": unpinned})),
                                cat))
    if issues:
        raise UserError(issues)
    return plans


def list_images(paths: list[Path]) -> dict[str, list[str]]:
    """cluster -> every image its outputs pull (dist/<cluster>/images.txt)."""
    from gpuop.outputs import images, manifests
    from gpuop.stack.synth import Synthesizer

    synth = Synthesizer()
    return {p.name: images.cluster_refs(p, manifests.rendered(synth.synthesize(p))) for p in _plans(paths)}


def parse_registry(url: str, plain_http: bool) -> tuple[str, str, str]:
    """URL -> (scheme, host[:port], path prefix). A bare host/path is https, or http with --plain-http."""
    if "://" not in url:
        url = ("http://" if plain_http else "https://") + url
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc or u.query or u.fragment:
        raise UserError([Issue("--registry", 0, 0, "", f"{url!r} is not a registry URL; allowed: "
                               "[http[s]://]HOST[:PORT][/PATH]")])
    return u.scheme, u.netloc, u.path.strip("/")


def _bearer(challenge: str) -> str | None:
    """An anonymous token for a `WWW-Authenticate: Bearer realm=...,service=...,scope=...` challenge."""
    if not challenge.lower().startswith("bearer "):
        return None
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None
    with urllib.request.urlopen(f"{realm}?{urllib.parse.urlencode(params)}", timeout=TIMEOUT) as r:
        doc = json.loads(r.read())
    return doc.get("token") or doc.get("access_token")


def manifest_digest(scheme: str, host: str, name: str, tag: str) -> str | None:
    """The digest of name:tag's manifest in the registry; None when the registry has no such tag."""
    url = f"{scheme}://{host}/v2/{name}/manifests/{urllib.parse.quote(tag)}"
    headers = {"Accept": ACCEPT}
    for _attempt in range(2):
        req = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                body, served = r.read(), r.headers.get("Docker-Content-Digest")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            token = _bearer(exc.headers.get("WWW-Authenticate", "")) if exc.code == 401 and "Authorization" not in headers else None
            if token:
                headers["Authorization"] = f"Bearer {token}"
                continue
            raise UserError([Issue(url, 0, 0, "", f"registry error: HTTP {exc.code} {exc.reason}")])
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if served and served != digest:        # the registry must serve what it names
            raise UserError([Issue(url, 0, 0, "", f"registry error: served digest {served} but the bytes hash to "
                                   f"{digest}")])
        return digest
    raise UserError([Issue(url, 0, 0, "", "registry error: authorization refused")])


def resolve(paths: list[Path], registry: str, lock_path: Path, plain_http: bool = False) -> dict[str, str]:
    """Fill `lock_path` with the digest of every image the profiles use; returns the entries resolved.
    Every image must be in the registry (a UserError lists the ones that are not)."""
    scheme, host, prefix = parse_registry(registry, plain_http)
    keys = sorted({k for plan in _unpinned_plans(paths) for k in plan.image_keys()})
    found, missing = {}, []
    for key in keys:
        path, _, tag = key.rpartition(":")
        name = f"{prefix}/{path}" if prefix else path
        try:
            digest = manifest_digest(scheme, host, name, tag)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UserError([Issue(registry, 0, 0, "", f"registry error: {reason}")])
        if digest is None:
            missing.append(f"{name}:{tag}")
        else:
            found[key] = digest
    if missing:
        raise UserError([Issue(registry, 0, 0, "", f"not in the registry: {', '.join(missing)}; mirror them first "
                               "(`gpuop images` lists them)")])
    old = {}
    if lock_path.exists():
        try:
            doc = json.loads(lock_path.read_text())
            old = doc.get("images", {}) if isinstance(doc, dict) and doc.get("kind") == LOCK_KIND else {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            old = {}
    images = {**old, **found}
    lock_path.write_text(json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": LOCK_KIND,
                                     "images": dict(sorted(images.items()))}, indent=2) + "\n")
    return found
