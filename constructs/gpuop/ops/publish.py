"""`gpuop publish --oci oci://HOST/PATH`: push the packaged charts of an output folder to an OCI
registry with Helm's own client (helm-python-sdk), never reusing a version for other content.

For each cluster in index.json: if the registry's tag list lacks the chart's version, push the archive
(a tag list gpuop cannot read — 401 for a push-only token, 403, 5xx — is exit 2, never taken as "no
repository": only a 404 says the repository does not exist yet);
if it has one, pull it and compare bytes — identical means already published (skipped), different
means someone published other content under this version, and gpuop refuses (exit 2) instead of
overwriting: Argo CD and Flux cache charts by version and would never see the change. Versions carry
no `+` build metadata, which OCI tags cannot hold.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpuop.errors import Issue, UserError
from gpuop.ops import registry


@dataclass(frozen=True)
class Outcome:
    chart: str
    version: str
    action: str    # pushed | unchanged | refused | not attempted


def publish_oci(dist: Path, remote: str, *, plain_http: bool = False) -> tuple[list[Outcome], list[Issue]]:
    """Every chart's outcome, and the issues (refused versions, a registry error). A registry error
    stops the run; the charts not reached are "not attempted", so the report says exactly what the
    registry now holds."""
    import helm_python as helm

    from gpuop.pipeline.write import read_index

    if not remote.startswith("oci://") or remote.rstrip("/") == "oci:/":
        raise UserError(Issue("--oci", 0, 0, "", f"{registry.redact(remote)!r} is not an OCI reference; allowed: "
                              "oci://HOST[:PORT]/PATH"))
    remote = remote.rstrip("/")
    registry.split_url("https://" + remote[len("oci://"):], "--oci")   # host, port, no credentials
    if not re.fullmatch(r"oci://[^/]+(/[a-z0-9]+([._-][a-z0-9]+)*)*", remote):
        raise UserError(Issue("--oci", 0, 0, "", f"{remote!r} is not an OCI reference; allowed: oci://HOST[:PORT]/PATH "
                              "(a path of lower-case letters, digits and . _ - separators)"))
    index = read_index(dist)
    missing = [Issue(str(dist / c["package"]), 0, 0, "", "chart archive is missing; run gpuop synth to rebuild it")
               for c in index["clusters"] if not (dist / c["package"]).is_file()]
    if missing:
        raise UserError(missing)
    client = helm.RegistryClient(plain_http=plain_http)
    outcomes, issues = [], []
    todo = list(index["clusters"])
    try:
        while todo:
            c = todo[0]
            name, version, archive = c["name"], c["chartVersion"], dist / c["package"]
            if "+" in version:
                issues.append(Issue(str(archive), 0, 0, "", f"version {version} has build metadata; OCI tags cannot"))
                outcomes.append(Outcome(name, version, "refused"))
                todo.pop(0)
                continue
            ref = f"{remote}/{name}"
            try:
                tags = client.tags(ref)
            except helm.HelmError as exc:
                if not _no_repository(exc):
                    # 401 (a push-only token), 403, 500, a timeout: the tag list is unreadable, so gpuop
                    # cannot prove the version absent and pushing could overwrite a published chart
                    detail = " ".join(str(exc).split())
                    issues.append(Issue(remote, 0, 0, "", f"registry error: cannot read the tags of {ref} ({detail}); refusing to "
                                        "push a version gpuop could not prove absent (a token that may push must "
                                        "also be allowed to list tags)"))
                    outcomes += [Outcome(t["name"], t["chartVersion"], "not attempted") for t in todo]
                    break
                tags = []      # the registry says the repository does not exist yet
            if version in tags:
                with tempfile.TemporaryDirectory() as tmp:
                    client.pull(ref, version=version, destination=tmp, plain_http=plain_http)
                    published = (Path(tmp) / f"{name}-{version}.tgz").read_bytes()
                if hashlib.sha256(published).digest() != hashlib.sha256(archive.read_bytes()).digest():
                    issues.append(Issue(str(archive), 0, 0, "", f"{ref}:{version} is already published with "
                                        "other content; refusing to overwrite it (recompile so the chart gets a "
                                        "new version, or publish to another path)"))
                    outcomes.append(Outcome(name, version, "refused"))
                else:
                    outcomes.append(Outcome(name, version, "unchanged"))
                todo.pop(0)
                continue
            client.push(str(archive), remote, plain_http=plain_http)
            outcomes.append(Outcome(name, version, "pushed"))
            todo.pop(0)
    except helm.HelmError as exc:          # the registry's answer (unreachable, auth, ...): not a gpuop bug
        detail = " ".join(str(exc).split())
        issues.append(Issue(remote, 0, 0, "", f"registry error: {detail}"))
        outcomes += [Outcome(c["name"], c["chartVersion"], "not attempted") for c in todo]
    finally:
        client.close()
    return outcomes, issues


def _no_repository(exc) -> bool:
    """The registry answered the tag list with 404 (NAME_UNKNOWN in the distribution spec; some registries
    word it otherwise): the repository does not exist yet, so no version of it can exist. Anything else
    (401 for a push-only token, 403, 5xx, no answer) proves nothing."""
    return re.search(r"response status code 404\b", " ".join(str(exc).split())) is not None


def summary(outcomes: list[Outcome]) -> str:
    """One line: how many charts were pushed, skipped (already published, same bytes), refused, not attempted."""
    count = {a: sum(1 for o in outcomes if o.action == a) for a in ("pushed", "unchanged", "refused", "not attempted")}
    return (f"gpuop: {count['pushed']} pushed, {count['unchanged']} skipped (already published), "
            f"{count['refused']} refused, {count['not attempted']} not attempted")
