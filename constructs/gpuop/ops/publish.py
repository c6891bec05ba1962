"""`gpuop publish --oci oci://HOST/PATH`: push the packaged charts of an output folder to an OCI
registry with Helm's own client (helm-python-sdk), never reusing a version for other content.

For each cluster in index.json: if the registry's tag list lacks the chart's version, push the archive
(a tag list gpuop cannot read — 401 for a push-only token, 403, 5xx — is exit 2, never taken as "no
repository": only a 404 says the repository does not exist yet);
if it has one, pull it and compare bytes — identical means already published (skipped), different
means someone published other content under this version, and gpuop refuses (exit 2) instead of
overwriting: Argo CD and Flux cache charts by version and would never see the change. Versions carry
no `+` build metadata, which OCI tags cannot hold.

Signing (settings `signing`, key file `--sign-key`; ops/signing.py): the key is read once before anything
is pushed (a wrong password or a file that is not a cosign key stops the run with nothing pushed). Each chart
pushed, and each one already published with the same bytes whose signature the key does not verify, is
signed with cosign over its manifest digest: the tag is resolved to a digest, the chart is pulled back by
that digest and compared byte for byte with the archive, and only then signed, so a tag moved to other
content in between is refused, never signed.
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
    # with signing: signed (now) | signature verified (an earlier run signed it) | not signed (refused)
    signature: str = ""


@dataclass(frozen=True)
class SignWith:
    """How `gpuop publish` signs: the cosign private key the user named (--sign-key) and the environment
    variable holding its password (settings signing.passwordEnv)."""
    key: Path
    password_env: str


def publish_oci(dist: Path, remote: str, *, plain_http: bool = False,
                sign_with: SignWith | None = None) -> tuple[list[Outcome], list[Issue]]:
    """Every chart's outcome, and the issues (refused versions, a registry error). A registry error
    stops the run; the charts not reached are "not attempted", so the report says exactly what the
    registry now holds."""
    import helm_python as helm

    from gpuop.ops import signing

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
    public_pem = None
    if sign_with is not None:      # the key and its password, before anything is pushed
        signing.check_key(sign_with.key)
        public_pem = signing.public_key(sign_with.key, sign_with.password_env)
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
                elif sign_with is None:
                    outcomes.append(Outcome(name, version, "unchanged"))
                else:
                    outcomes.append(_signed(client, ref, version, archive, "unchanged", sign_with, public_pem,
                                            plain_http, issues))
                todo.pop(0)
                continue
            client.push(str(archive), remote, plain_http=plain_http)
            outcomes.append(Outcome(name, version, "pushed") if sign_with is None else
                            _signed(client, ref, version, archive, "pushed", sign_with, public_pem, plain_http, issues))
            todo.pop(0)
    except helm.HelmError as exc:          # the registry's answer (unreachable, auth, ...): not a gpuop bug
        detail = " ".join(str(exc).split())
        issues.append(Issue(remote, 0, 0, "", f"registry error: {detail}"))
        outcomes += [Outcome(c["name"], c["chartVersion"], "not attempted") for c in todo]
    finally:
        client.close()
    return outcomes, issues


def _published_digest(client, ref: str, version: str, archive: Path, plain_http: bool) -> str | None:
    """The manifest digest `ref:version` names now, when the chart stored under that digest is byte for byte
    `archive` (pulled back by digest: Helm's client checks what it fetches against the digest); None when
    the tag names other content (moved since gpuop pushed or compared it)."""
    digest = client.resolve(f"{ref}:{version}")["digest"]
    with tempfile.TemporaryDirectory() as tmp:
        client.pull(f"{ref}@{digest}", destination=tmp, plain_http=plain_http)
        pulled = list(Path(tmp).iterdir())
        same = len(pulled) == 1 and pulled[0].read_bytes() == archive.read_bytes()
    return digest if same else None


def _signed(client, ref: str, version: str, archive: Path, action: str, sign_with: SignWith, public_pem: str,
            plain_http: bool, issues: list[Issue]) -> Outcome:
    """Sign the chart just pushed or found published (unless the key's signature already covers it)."""
    from gpuop.ops import signing

    name = ref.rsplit("/", 1)[1]
    digest = _published_digest(client, ref, version, archive, plain_http)
    if digest is None:
        issues.append(Issue(str(archive), 0, 0, "", f"{ref}:{version} names other content than this archive (the "
                            "tag moved while gpuop published it); refusing to sign it"))
        return Outcome(name, version, action, "not signed")
    target = f"{ref.removeprefix('oci://')}@{digest}"
    with tempfile.TemporaryDirectory() as tmp:
        pub = Path(tmp) / "cosign.pub"
        pub.write_text(public_pem)
        if action == "unchanged" and signing.verify(target, pub, plain_http) is None:
            return Outcome(name, version, action, "signature verified")
    problem = signing.sign(target, sign_with.key, sign_with.password_env, plain_http)
    if problem:
        issues.append(Issue(str(archive), 0, 0, "", f"cannot sign {target}: {problem}"))
        return Outcome(name, version, action, "not signed")
    return Outcome(name, version, action, "signed")


def _no_repository(exc) -> bool:
    """The registry answered the tag list with 404 (NAME_UNKNOWN in the distribution spec; some registries
    word it otherwise): the repository does not exist yet, so no version of it can exist. Anything else
    (401 for a push-only token, 403, 5xx, no answer) proves nothing."""
    return re.search(r"response status code 404\b", " ".join(str(exc).split())) is not None


def summary(outcomes: list[Outcome]) -> str:
    """One line: how many charts were pushed, skipped (already published, same bytes), refused, not attempted."""
    count = {a: sum(1 for o in outcomes if o.action == a) for a in ("pushed", "unchanged", "refused", "not attempted")}
    signed = ""
    if any(o.signature for o in outcomes):
        signed = (f"; {sum(1 for o in outcomes if o.signature == 'signed')} signed, "
                  f"{sum(1 for o in outcomes if o.signature == 'signature verified')} signature(s) verified, "
                  f"{sum(1 for o in outcomes if o.signature == 'not signed')} not signed")
    return (f"gpuop: {count['pushed']} pushed, {count['unchanged']} skipped (already published), "
            f"{count['refused']} refused, {count['not attempted']} not attempted{signed}")
