"""`gpuop publish --oci oci://HOST/PATH`: push the packaged charts of an output folder to an OCI
registry with Helm's own client (helm-python-sdk), never reusing a version for other content.

For each cluster in index.json: if the registry has no tag for the chart's version, push the archive;
if it has one, pull it and compare bytes — identical means already published (skipped), different
means someone published other content under this version, and gpuop refuses (exit 2) instead of
overwriting: Argo CD and Flux cache charts by version and would never see the change. Versions carry
no `+` build metadata, which OCI tags cannot hold.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpuop.errors import Issue, UserError


@dataclass(frozen=True)
class Outcome:
    chart: str
    version: str
    action: str    # pushed | unchanged


def publish_oci(dist: Path, remote: str, *, plain_http: bool = False) -> list[Outcome]:
    import helm_python as helm

    if not remote.startswith("oci://") or remote.rstrip("/") == "oci:/":
        raise UserError(Issue("--oci", 0, 0, "", f"{remote!r} is not an OCI reference; allowed: oci://HOST[:PORT]/PATH"))
    remote = remote.rstrip("/")
    try:
        index = json.loads((dist / "index.json").read_text())
    except (OSError, ValueError) as exc:
        raise UserError(Issue(str(dist), 0, 0, "", f"not a gpuop output folder ({exc}); run gpuop synth first"))
    client = helm.RegistryClient(plain_http=plain_http)
    outcomes, issues = [], []
    try:
        for c in index["clusters"]:
            name, version, archive = c["name"], c["chartVersion"], dist / c["package"]
            if "+" in version:
                issues.append(Issue(str(archive), 0, 0, "", f"version {version} has build metadata; OCI tags cannot"))
                continue
            ref = f"{remote}/{name}"
            try:
                tags = client.tags(ref)
            except helm.HelmError:
                tags = []      # repository does not exist yet
            if version in tags:
                with tempfile.TemporaryDirectory() as tmp:
                    client.pull(ref, version=version, destination=tmp, plain_http=plain_http)
                    published = (Path(tmp) / f"{name}-{version}.tgz").read_bytes()
                if hashlib.sha256(published).digest() != hashlib.sha256(archive.read_bytes()).digest():
                    issues.append(Issue(str(archive), 0, 0, "", f"{ref}:{version} is already published with "
                                        "other content; refusing to overwrite it (recompile so the chart gets a "
                                        "new version, or publish to another path)"))
                else:
                    outcomes.append(Outcome(name, version, "unchanged"))
                continue
            client.push(str(archive), remote, plain_http=plain_http)
            outcomes.append(Outcome(name, version, "pushed"))
    except helm.HelmError as exc:          # the registry's answer (unreachable, auth, ...): not a gpuop bug
        detail = " ".join(str(exc).split())
        raise UserError(issues + [Issue(remote, 0, 0, "", f"registry error: {detail}")])
    finally:
        client.close()
    if issues:
        raise UserError(issues)
    return outcomes
