"""cosign, sigstore's signer and verifier, run as a command: `gpuop publish --oci --sign-key FILE` signs each
chart it pushes, `gpuop images resolve --verify-key FILE` verifies an upstream image's signature before it
locks the digest.

Keyed and offline: a signature is made with a cosign key pair (`cosign generate-key-pair`) and stored in the
registry beside the artifact, nothing is uploaded to a transparency log (`--tlog-upload=false`), no Fulcio
certificate is asked for, and verification checks the signature against the public key alone
(`--insecure-ignore-tlog`, what Flux's source-controller does for `spec.verify` with a public key). The
signature is always made over the manifest digest gpuop pushed or resolved, never over a tag, so a tag moved
to other content afterwards is not covered by it.

Which cosign runs: $GPUOP_COSIGN (a path the user sets), else `cosign` on PATH, else the one a gpuop
checkout built (`make cosign`: tools/rehearsal/build.py --cosign, the version tools/rehearsal/cosign pins).
Nothing read from the repository names it. The private key's password is handed to cosign in
COSIGN_PASSWORD, read from the environment variable the settings name (signing.passwordEnv); it never
appears on a command line or in a message.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuop.errors import Issue, UserError

COSIGN_ENV = "GPUOP_COSIGN"
BUILD_SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "rehearsal" / "build.py"
TIMEOUT = 300          # seconds one cosign run may take (a registry on the other side of the world)
# cosign's own output can echo a registry's answer: bounded, one line, in the message
MAX_DETAIL = 600
_DIGEST_REF = re.compile(r"[^\s@]+@sha256:[0-9a-f]{64}")


def cosign_command() -> str:
    """The cosign binary to run, or a located UserError saying how to get one."""
    given = os.environ.get(COSIGN_ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UserError(Issue(COSIGN_ENV, 0, 0, "", f"{given!r} is not an executable file (the cosign binary)"))
        return str(path)
    found = shutil.which("cosign")
    if found:
        return found
    if BUILD_SCRIPT.is_file():       # a gpuop checkout: the cosign `make cosign` built, if it did
        check = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--cosign", "--check"], capture_output=True)
        where = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--cosign", "--print-dir"], capture_output=True,
                               text=True)
        if check.returncode == 0 and where.returncode == 0:
            return str(Path(where.stdout.strip()) / "cosign")
    raise UserError(Issue("cosign", 0, 0, "", f"cosign not found: set {COSIGN_ENV} to the cosign binary, put cosign "
                          "on PATH, or run `make cosign` in a gpuop checkout (builds cosign from the Go module proxy)"))


def _detail(proc: subprocess.CompletedProcess) -> str:
    """cosign's reason in one line: its `Error: ...` line (its warnings, e.g. about skipping the transparency
    log, and the repeated "error during command execution" line left out)."""
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    errors = [ln.removeprefix("Error: ") for ln in lines if ln.startswith("Error: ")]
    text = errors[0] if errors else " ".join(ln for ln in lines if not ln.startswith("WARNING"))
    return " ".join(text.split())[:MAX_DETAIL] or f"exit {proc.returncode}"


def _run(args: list[str], *, password: str | None = None) -> subprocess.CompletedProcess:
    # a fresh environment for cosign: the password as cosign reads it, no sigstore state shared with other
    # runs (TUF_ROOT), no experimental switch from the caller's shell
    with tempfile.TemporaryDirectory(prefix="gpuop-cosign-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COSIGN_", "SIGSTORE_", "TUF_"))}
        env.update({"TUF_ROOT": str(Path(home) / "tuf"), "COSIGN_YES": "true"})
        if password is not None:
            env["COSIGN_PASSWORD"] = password
        try:
            return subprocess.run([cosign_command(), *args], env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, 124, "", f"cosign did not finish within {TIMEOUT} s")


def _registry_flags(plain_http: bool) -> list[str]:
    return ["--allow-http-registry", "--allow-insecure-registry"] if plain_http else []


def password(env_name: str) -> str:
    """The private key's password from the environment variable the settings name ("" when unset: an
    unencrypted key, as cosign reads an empty COSIGN_PASSWORD)."""
    return os.environ.get(env_name, "")


def check_key(key: Path, what: str = "--sign-key") -> Path:
    """A key file the user named: it must be a readable file (never a folder, never missing)."""
    if not key.is_file():
        raise UserError(Issue(what, 0, 0, "", f"{str(key)!r} is not a file (a cosign key from `cosign generate-key-pair`)"))
    if not os.access(key, os.R_OK):
        raise UserError(Issue(what, 0, 0, "", f"{str(key)!r} is not readable"))
    return key


def sign(ref: str, key: Path, password_env: str, plain_http: bool) -> str | None:
    """Sign `ref` (REGISTRY/REPO@sha256:...) with the cosign private key: the signature goes to the same
    registry, nothing to a transparency log. None when signed, else cosign's reason (one line)."""
    assert _DIGEST_REF.fullmatch(ref), ref      # gpuop signs digests it pushed, never a tag
    proc = _run(["sign", "--key", str(key), "--tlog-upload=false", "--use-signing-config=false",
                 *_registry_flags(plain_http), ref], password=password(password_env))
    return None if proc.returncode == 0 else _detail(proc)


def verify(ref: str, public_key: Path, plain_http: bool) -> str | None:
    """Verify `ref`'s cosign signature against the public key, offline (no transparency log): None when a
    signature the key made covers exactly this digest, else cosign's reason (one line)."""
    proc = _run(["verify", "--key", str(public_key), "--insecure-ignore-tlog=true", "--output", "json",
                 *_registry_flags(plain_http), ref])
    return None if proc.returncode == 0 else _detail(proc)


def public_key(key: Path, password_env: str) -> str:
    """The public key of a cosign private key (PEM), or a located UserError (a wrong password, not a key)."""
    proc = _run(["public-key", "--key", str(key)], password=password(password_env))
    if proc.returncode != 0 or "PUBLIC KEY" not in proc.stdout:
        raise UserError(Issue(str(key), 0, 0, "", f"cannot read the cosign private key: {_detail(proc)} (its password "
                              f"is read from ${password_env}, the settings' signing.passwordEnv)"))
    return proc.stdout
