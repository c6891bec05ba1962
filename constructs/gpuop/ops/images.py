"""`gpuop images`: every image a cluster runs, and `gpuop images resolve --registry URL`: a digest lock
filled from a registry, for air-gapped and pinned sites.

- List: the profiles are compiled in-process (validate, plan, synthesize) and the container images of
  their rendered manifests printed per cluster, exactly what synth writes to dist/<cluster>/images.txt.
- Resolve: for every image the clusters' plans use (StackPlan.image_keys: <path>:<tag> below the
  registry), the registry's manifest for <registry path>/<path>:<tag> is fetched over the Docker
  Registry HTTP API v2 (`GET /v2/<name>/manifests/<tag>`, Accept: OCI index / manifest and Docker
  manifest list / v2) and its digest taken as sha256 of the bytes served. The answer is untrusted
  (ops/registry.py bounds it: same-host redirects, a deadline, a size cap): its media type must be a
  manifest type and the registry's Docker-Content-Digest must be present and agree with the bytes. An
  anonymous bearer token is fetched when the registry asks for one (WWW-Authenticate: Bearer
  realm=...), from a realm over https or on the registry's own host only. The lock (kind ImageDigests) keeps entries of other images, so
  one lock can serve several profiles; keys are below the registry, so the digests hold in any mirror.
  A profile pins with spec.images.digestLock.
- Verify (`resolve --verify-key FILE`): before anything is locked, each resolved digest's cosign signature is
  verified against the public key (ops/signing.py: the real cosign, keyed and offline), at the digest just
  resolved, in the same registry (a mirror must carry the signatures: `cosign copy`). One image whose
  signature the key does not verify refuses the whole lock, every such image named with cosign's reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import urllib.parse
from pathlib import Path

from gpuop.profile.bounded import parse_json, read_json
from gpuop.errors import Issue, UserError
from gpuop.ops import registry as registry_http

LOCK_KIND = "ImageDigests"        # plan/build.py read_lock reads what this writes
ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"))
TIMEOUT = 30                      # seconds per registry request (connect, headers and body): --timeout
MAX_LOCK_BYTES = 16 * 1024 * 1024


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
    """URL -> (scheme, host[:port], path prefix). A bare host/path is https, or http with --plain-http.
    Checked by the registry client's URL grammar (ops/registry.py): http(s) only, an ASCII host, a
    port in range, no credentials (they would be sent to the resolver and every redirect)."""
    shown = registry_http.redact(url)
    if "://" not in url:
        url = ("http://" if plain_http else "https://") + url
    u = registry_http.split_url(url, "--registry")
    if not u.netloc or u.query or u.fragment or not re.fullmatch(r"[A-Za-z0-9._/-]*", u.path):
        raise UserError([Issue("--registry", 0, 0, "", f"{shown!r} is not a registry URL; allowed: "
                               "[http[s]://]HOST[:PORT][/PATH]")])
    return u.scheme, u.netloc, u.path.strip("/")


MANIFEST_TYPES = frozenset(ACCEPT.split(", "))
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _bearer(challenge: str, registry_url: str, deadline: float) -> str | None:
    """An anonymous token for a `WWW-Authenticate: Bearer realm=...,service=...,scope=...` challenge.
    The realm receives the question, so it must be https, or the registry's own host (never file:)."""
    if not challenge.lower().startswith("bearer "):
        return None
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None
    where = registry_http.redact(registry_url)
    problem = registry_http.realm_problem(realm, urllib.parse.urlsplit(registry_url))
    if problem:
        raise UserError(Issue(where, 0, 0, "", f"registry error: {problem}"))
    sep = "&" if urllib.parse.urlsplit(realm).query else "?"
    r = registry_http.get(f"{realm}{sep}{urllib.parse.urlencode(params)}", where=where, deadline=deadline)
    if r.status != 200:
        raise UserError(Issue(where, 0, 0, "", f"registry error: the token realm answered HTTP {r.status}"))
    doc = parse_json(f"{where} (token)", r.body)
    token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
    if not isinstance(token, str) or not re.fullmatch(r"[\x21-\x7e]{1,16384}", token):
        raise UserError(Issue(where, 0, 0, "", "registry error: the token realm's answer holds no token"))
    return token


def check_manifest(url: str, r: "registry_http.Response") -> str:
    """The digest of a manifest answer, or UserError: the media type must be a manifest type (an HTML
    login page answered with 200 is not a manifest), the registry must name the digest
    (Docker-Content-Digest) and the bytes must hash to it, and the body must be a JSON manifest."""
    ctype = (r.headers.get("content-type") or "").split(";")[0].strip().lower()
    if ctype not in MANIFEST_TYPES:
        raise UserError(Issue(url, 0, 0, "", f"registry error: answered {ctype or 'no media type'!r}, not a "
                              f"manifest; allowed: {ACCEPT}"))
    served = (r.headers.get("docker-content-digest") or "").strip()
    if not _DIGEST.fullmatch(served):
        raise UserError(Issue(url, 0, 0, "", "registry error: the answer names no digest (Docker-Content-Digest "
                              "missing or malformed); gpuop records only a digest the registry vouches for"))
    digest = "sha256:" + hashlib.sha256(r.body).hexdigest()
    if served != digest:        # the registry must serve what it names
        raise UserError(Issue(url, 0, 0, "", f"registry error: served digest {served} but the bytes hash to "
                              f"{digest}"))
    doc = parse_json(url, r.body)
    if not isinstance(doc, dict) or doc.get("schemaVersion") != 2 or doc.get("mediaType", ctype) not in MANIFEST_TYPES:
        raise UserError(Issue(url, 0, 0, "", "registry error: the body is not an image manifest (schemaVersion 2 "
                              "with a manifest media type)"))
    return digest


def manifest_digest(scheme: str, host: str, name: str, tag: str, timeout: float = TIMEOUT) -> str | None:
    """The digest of name:tag's manifest in the registry; None when the registry has no such tag."""
    url = f"{scheme}://{host}/v2/{name}/manifests/{urllib.parse.quote(tag)}"
    headers = {"Accept": ACCEPT}
    for _attempt in range(2):
        r = registry_http.get(url, headers, cap=registry_http.MAX_MANIFEST_BYTES, deadline=timeout)
        if r.status == 404:
            return None
        if r.status == 401 and "Authorization" not in headers:
            token = _bearer(r.headers.get("www-authenticate", ""), url, timeout)
            if token:
                headers["Authorization"] = f"Bearer {token}"
                continue
        if r.status != 200:
            raise UserError([Issue(url, 0, 0, "", f"registry error: HTTP {r.status}")])
        return check_manifest(url, r)
    raise UserError([Issue(url, 0, 0, "", "registry error: authorization refused")])


def verify_signatures(host: str, prefix: str, found: dict[str, str], public_key: Path, plain_http: bool) -> None:
    """Every resolved digest's cosign signature verified against the public key, or a UserError naming
    each image the key does not verify (nothing is locked then)."""
    from gpuop.ops import signing

    signing.check_key(public_key, "--verify-key")
    issues = []
    for key, digest in sorted(found.items()):
        path, _, tag = key.rpartition(":")
        name = f"{prefix}/{path}" if prefix else path
        problem = signing.verify(f"{host}/{name}@{digest}", public_key, plain_http)
        if problem:
            issues.append(Issue(f"{host}/{name}:{tag}", 0, 0, "", f"signature not verified by {public_key} at "
                                f"{digest}: {problem}; refusing to lock it"))
    if issues:
        raise UserError(issues)


def resolve(paths: list[Path], registry: str, lock_path: Path, plain_http: bool = False,
            timeout: float = TIMEOUT, verify_key: Path | None = None) -> dict[str, str]:
    """Fill `lock_path` with the digest of every image the profiles use; returns the entries resolved.
    Every image must be in the registry (a UserError lists the ones that are not) and, with `verify_key`,
    signed with that key's pair."""
    scheme, host, prefix = parse_registry(registry, plain_http)
    keys = sorted({k for plan in _unpinned_plans(paths) for k in plan.image_keys()})
    found, missing = {}, []
    for key in keys:
        path, _, tag = key.rpartition(":")
        name = f"{prefix}/{path}" if prefix else path
        digest = manifest_digest(scheme, host, name, tag, timeout)
        if digest is None:
            missing.append(f"{name}:{tag}")
        else:
            found[key] = digest
    if missing:
        raise UserError([Issue(registry_http.redact(registry), 0, 0, "", f"not in the registry: {', '.join(missing)}; mirror them first "
                               "(`gpuop images` lists them)")])
    if verify_key is not None:
        verify_signatures(host, prefix, found, verify_key, plain_http)
    old = {}
    if os.path.lexists(lock_path):      # the previous lock: bounded, never through a symlink
        doc = read_json(lock_path, str(lock_path), limit=MAX_LOCK_BYTES, what="a digest lock")
        old = doc.get("images", {}) if isinstance(doc, dict) and doc.get("kind") == LOCK_KIND else {}
        if not isinstance(old, dict) or not all(isinstance(k, str) and isinstance(v, str) and _DIGEST.fullmatch(v)
                                                for k, v in old.items()):
            raise UserError(Issue(str(lock_path), 0, 0, "images", "not a digest lock (image key -> sha256:...); "
                                  "restore it from git or delete it"))
    images = {**old, **found}
    text = json.dumps({"apiVersion": "gpuop/v1alpha1", "kind": LOCK_KIND, "images": dict(sorted(images.items()))},
                      indent=2) + "\n"
    tmp = lock_path.with_name(f".{lock_path.name}.{os.getpid()}.tmp")
    try:        # whole or not at all, and never through a link: a new file, then one rename
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, lock_path)
    except OSError as exc:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise UserError(Issue(str(lock_path), 0, 0, "", f"cannot write the digest lock: {exc.strerror or exc}"))
    return found
