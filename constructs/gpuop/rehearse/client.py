"""A small JSON client of the rehearsal's loopback API server, from its kubeconfig (the current context's
server, CA and client certificate / key or bearer token, inline `-data` or as files). Only what the
rehearsal needs: get, list, create, merge-patch (status too), delete. Errors carry the API server's own
Status message.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

import yaml


class ApiError(Exception):
    def __init__(self, code: int, message: str, reason: str = ""):
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


# apiVersion/kind -> (path prefix, plural, namespaced); only the kinds the rehearsal itself reads or writes
KINDS = {
    ("v1", "Node"): ("/api/v1", "nodes", False),
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "Pod"): ("/api/v1", "pods", True),
    ("apps/v1", "DaemonSet"): ("/apis/apps/v1", "daemonsets", True),
    ("nfd.k8s-sigs.io/v1alpha1", "NodeFeature"): ("/apis/nfd.k8s-sigs.io/v1alpha1", "nodefeatures", True),
    ("resource.k8s.io/v1", "ResourceSlice"): ("/apis/resource.k8s.io/v1", "resourceslices", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
}


class Client:
    def __init__(self, kubeconfig: Path):
        doc = yaml.safe_load(Path(kubeconfig).read_text())
        ctx_name = doc.get("current-context") or doc["contexts"][0]["name"]
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next((u["user"] for u in doc.get("users", []) if u["name"] == ctx.get("user")), {}) or {}
        self.server = cluster["server"].rstrip("/")
        self._tmp = tempfile.TemporaryDirectory(prefix="gpuop-rehearse-client-")
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = f"Bearer {user['token']}"
        self.context = None
        if self.server.startswith("https"):
            ca = self._file(cluster, "certificate-authority")
            ctx_ssl = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
            if ca is None or cluster.get("insecure-skip-tls-verify"):
                ctx_ssl.check_hostname = False
                ctx_ssl.verify_mode = ssl.CERT_NONE
            cert, key = self._file(user, "client-certificate"), self._file(user, "client-key")
            if cert:
                ctx_ssl.load_cert_chain(cert, key)
            self.context = ctx_ssl

    def _file(self, section: dict, key: str) -> str | None:
        if section.get(f"{key}-data"):
            path = Path(self._tmp.name) / key
            path.write_bytes(base64.b64decode(section[f"{key}-data"]))
            return str(path)
        return section.get(key)

    def close(self) -> None:
        self._tmp.cleanup()

    def request(self, method: str, path: str, body=None, content_type: str | None = None):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                status = json.loads(raw)
                raise ApiError(exc.code, status.get("message", raw.decode()), status.get("reason", "")) from None
            except ValueError:
                raise ApiError(exc.code, raw.decode(errors="replace")) from None
        return json.loads(raw) if raw else None

    @staticmethod
    def path(api_version: str, kind: str, namespace: str | None = None, name: str | None = None,
             sub: str | None = None) -> str:
        prefix, plural, namespaced = KINDS[(api_version, kind)]
        p = prefix + (f"/namespaces/{quote(namespace)}" if namespaced and namespace else "") + f"/{plural}"
        if name:
            p += f"/{quote(name)}"
        if sub:
            p += f"/{sub}"
        return p

    def create(self, obj: dict) -> dict:
        m = obj["metadata"]
        return self.request("POST", self.path(obj["apiVersion"], obj["kind"], m.get("namespace")), obj)

    def ensure(self, obj: dict) -> dict | None:
        """Create, or leave as is when it exists already."""
        try:
            return self.create(obj)
        except ApiError as exc:
            if exc.code != 409:
                raise
            return None

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def list(self, api_version: str, kind: str, namespace: str | None = None, **query) -> list[dict]:
        q = ("?" + urlencode(query)) if query else ""
        return self.request("GET", self.path(api_version, kind, namespace) + q)["items"]

    def patch(self, api_version: str, kind: str, name: str, patch: dict, namespace: str | None = None,
              sub: str | None = None) -> dict:
        return self.request("PATCH", self.path(api_version, kind, namespace, name, sub), patch,
                            "application/merge-patch+json")
