"""Loopback HTTP servers that misbehave on purpose, for the hostile-registry tests: each is a small
http.server on 127.0.0.1 in a thread, answering by a handler function the test writes."""

from __future__ import annotations

import hashlib
import http.server
import json
import sys
import threading
from contextlib import contextmanager

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def manifest_for(path: str) -> bytes:
    """A small, valid OCI image manifest, different per repository path and tag."""
    seed = hashlib.sha256(path.encode()).hexdigest()
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": f"sha256:{seed}", "size": 2},
                       "layers": []}, sort_keys=True).encode()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answer = None          # set per server: callable(handler) -> None, writes the whole answer
    seen: list

    def do_GET(self):  # noqa: N802
        self.seen.append((self.path, dict(self.headers)))
        try:
            type(self).answer(self)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_PUT = do_POST = do_HEAD = do_GET

    def log_message(self, *args):
        pass

    def send(self, status: int, body: bytes = b"", headers: dict | None = None, length: str | None = None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", length if length is not None else str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def good_manifest(self):
        body = manifest_for(self.path)
        self.send(200, body, {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": digest(body)})


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # gpuop hangs up on a hostile answer mid-request (that is the point): the reset is expected, and its
        # traceback on stderr would land among the stderr lines the tests compare
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


@contextmanager
def serve(answer):
    """A loopback server whose every request is answered by `answer(handler)`; yields (base URL, seen)."""
    seen: list = []
    cls = type("H", (Handler,), {"answer": staticmethod(answer), "seen": seen})
    server = _QuietServer(("127.0.0.1", 0), cls)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
