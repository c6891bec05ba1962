"""A registry's answers are untrusted input: the bounded HTTP client `images resolve` and `publish` use.

- Only http and https, a host in ASCII (IDNA `xn--` form for international names), a port in
  1..65535, never credentials in the URL (they would be sent to every redirect and written into logs;
  a registry that needs a login gets it from the token endpoint or the client's credential store).
- Redirects: only to the same host (scheme http or https, same host and port), at most MAX_REDIRECTS.
  A registry that sends a manifest request to another host (or to ftp:, file:) is refused: a mirror
  that hands the question to someone else cannot vouch for the answer.
- One deadline per request, covering connect, headers and body together: a timer shuts the socket down
  when it passes, so a server that sends a byte every few seconds cannot keep gpuop waiting (a
  per-read timeout alone restarts with every byte).
- At most `cap` bytes per response: a declared Content-Length above it is refused before reading, a
  malformed one is refused, and a body without one is read up to the cap and no further.
- Bearer token realms only over https, or on the registry's own host; never file: or another scheme.

Errors are UserError (exit 2) naming the URL without credentials.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from gpuop.profile.bounded import host_problem
from gpuop.errors import Issue, UserError

MAX_REDIRECTS = 5
DEADLINE = 30.0                       # seconds per request (connect, headers and body)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # the OCI distribution spec's manifest size registries must accept
MAX_SMALL_BYTES = 1024 * 1024         # a token or a tag list page


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict           # lower-case name -> value (the last one of a repeated header)
    body: bytes
    url: str


def _error(where: str, message: str) -> UserError:
    return UserError(Issue(where, 0, 0, "", f"registry error: {message}"))


def split_url(url: str, where: str, schemes: tuple[str, ...] = ("http", "https")) -> urllib.parse.SplitResult:
    """A URL checked against the client's grammar, or a UserError at `where`."""
    if len(url) > 2048 or not url.isascii() or re.search(r"[\x00-\x20\x7f]", url):
        raise _error(where, "not an allowed URL (longer than 2048 characters, non-ASCII, spaces or control "
                     "characters)")
    u = urllib.parse.urlsplit(url)
    if u.scheme not in schemes:
        raise _error(where, f"{u.scheme or 'no'} scheme; allowed: {', '.join(schemes)}")
    if "@" in u.netloc:
        raise _error(where, "credentials in the URL are refused (they would be sent to every redirect and "
                     "logged); use the registry's token endpoint or `helm registry login`")
    problem = host_problem(u.hostname or "")
    if problem:
        raise _error(where, f"{redact(url)} {problem}")
    try:
        port = u.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535 or u.netloc.endswith(":"):
        raise _error(where, f"{redact(url)} has a port outside 1..65535")
    return u


def redact(url: str) -> str:
    """`url` without its user:password@ part, for messages."""
    return re.sub(r"(?<=://)[^/@]*@", "", url)


def _origin(u: urllib.parse.SplitResult) -> tuple[str, int]:
    return (u.hostname or "").lower(), u.port or (443 if u.scheme == "https" else 80)


def _content_length(value: str | None, where: str, cap: int) -> int | None:
    if value is None:
        return None
    if not re.fullmatch(r"[0-9]{1,19}", value.strip()):
        raise _error(where, f"malformed Content-Length {value[:40]!r}")
    n = int(value)
    if n > cap:
        raise _error(where, f"the response is {n} bytes; at most {cap} are accepted (limit {cap})")
    return n


def _once(u: urllib.parse.SplitResult, headers: dict, cap: int, deadline: float, where: str,
          seconds: float) -> Response:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _error(where, f"no answer within {seconds:g} s")
    host, port = _origin(u)
    conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    kwargs = {"context": ssl.create_default_context()} if u.scheme == "https" else {}
    # the socket's own timeout a second past the deadline, so the deadline's timer speaks first
    conn = conn_cls(host, port, timeout=min(remaining + 1.0, 10.0), **kwargs)
    expired = threading.Event()

    def stop():                            # the one deadline for connect, headers and body
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    timer = threading.Timer(remaining, stop)
    timer.daemon = True
    timer.start()
    try:
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        conn.request("GET", path, headers={"User-Agent": "gpuop", "Accept-Encoding": "identity", **headers})
        r = conn.getresponse()
        got = {k.lower(): v for k, v in r.getheaders()}
        length = _content_length(got.get("content-length"), where, cap)
        chunks, size = [], 0
        while True:
            chunk = r.read1(min(65536, cap + 1 - size)) if size <= cap else b""
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                raise _error(where, f"the response is more than {cap} bytes (limit {cap})")
        if expired.is_set():
            raise _error(where, f"no complete answer within {seconds:g} s")
        if length is not None and size != length:
            raise _error(where, f"the response ended after {size} of the {length} bytes its Content-Length says")
        return Response(r.status, got, b"".join(chunks), urllib.parse.urlunsplit(u))
    except UserError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set() or time.monotonic() >= deadline:
            raise _error(where, f"no complete answer within {seconds:g} s")
        raise _error(where, f"{type(exc).__name__}: {exc}")
    finally:
        timer.cancel()
        conn.close()


def get(url: str, headers: dict | None = None, *, cap: int = MAX_SMALL_BYTES, where: str | None = None,
        deadline: float | None = None) -> Response:
    """GET `url`, following same-host redirects (at most MAX_REDIRECTS), within the deadline and the cap."""
    where = redact(url) if where is None else where
    u = split_url(url, where)
    origin = _origin(u)
    seconds = DEADLINE if deadline is None else deadline
    end = time.monotonic() + seconds
    for _ in range(MAX_REDIRECTS + 1):
        r = _once(u, dict(headers or {}), cap, end, where, seconds)
        if r.status not in (301, 302, 303, 307, 308):
            return r
        target = r.headers.get("location")
        if not target:
            raise _error(where, f"HTTP {r.status} redirect without a Location")
        nxt = split_url(urllib.parse.urljoin(urllib.parse.urlunsplit(u), target), where)
        if _origin(nxt) != origin:
            raise _error(where, f"redirect to another host ({_origin(nxt)[0]}) refused; only redirects on "
                         f"{origin[0]}:{origin[1]} are followed")
        u = nxt
    raise _error(where, f"more than {MAX_REDIRECTS} redirects")


def realm_problem(realm: str, registry: urllib.parse.SplitResult) -> str | None:
    """Why a Bearer realm may not be asked for a token (it would receive the request); None when it may:
    https on any host, or the registry's own host and scheme."""
    u = urllib.parse.urlsplit(realm)
    if u.scheme not in ("http", "https"):
        return f"token realm with scheme {u.scheme or 'none'!r} refused; allowed: https, or the registry's own host"
    if u.scheme == "http" and _origin(u)[0] != _origin(registry)[0]:
        return "token realm over plain http on another host refused; allowed: https, or the registry's own host"
    return None
