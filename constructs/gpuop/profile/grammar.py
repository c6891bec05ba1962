"""The grammars of the strings a profile or the settings hand on to objects, templates and command lines, one per
kind of value, each a type every field of that kind is declared with (a new field of the kind gets the grammar by
its type):

- URLs (`url_problem`, `Url`): a scheme of the field's set, a host (ASCII/IDNA, IPv4 or bracketed IPv6), a port in
  1..65535, a plain path, no query or fragment, no control character or space, and never credentials: a profile
  and the settings are committed to git in plain text, so USER:PASSWORD@ is refused with the reference to use
  instead (a Secret). Proxies (http, https), chart repositories (https, oci), the git repository of the settings.
- Image repositories (`ImageRepository`): the distribution reference grammar (docker/distribution reference.go:
  domain[:port]/path, lowercase components joined by one of . _ __ -), which a container runtime parses.
- Host paths (`HostPath`): absolute, no `..` part, no control character (a newline would split the line a
  kubelet, a script or a YAML reader sees).
- Node group names (`NodeGroupName`): what the node group APIs accept (EKS, Karpenter, GKE, MachineSets): letters,
  digits and . _ - : /, starting and ending with a letter or digit.
- Container args and env values (`Arg`, `EnvValue`): any text but NUL (execve ends a string there: the process
  would see another argument than the object shows) and the characters YAML 1.1 reads as line breaks where YAML
  1.2 does not (NEL, LS, PS), or that no YAML stream may hold (other C0/C1 controls, BOM, lone surrogates); tab
  and newline are text.

Every accepted string is written into the output as it is and reads back equal under YAML 1.1 and 1.2
(tests/test_grammar.py checks each grammar by property).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from gpuop.profile.bounded import host_problem

_CONTROL = re.compile(r"[\x00-\x20\x7f]")   # whitespace and control characters end a URL or a ref

MAX_URL = 2048
# what a URL path may hold: RFC 3986 unreserved, '%XX', and / + : @ = , — nothing a Go template (`{{`),
# Flux's variable substitution (`${`), YAML, a shell or a query could read as syntax
_URL_PATH = re.compile(r"(/([A-Za-z0-9._~+:@=,!-]|%[0-9A-Fa-f]{2})*)*")
_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SECRET_HINT = "keep credentials in a Secret in the cluster and reference it by name"


def url_problem(v: str, schemes: tuple[str, ...], scp: bool = False, secret: str = SECRET_HINT) -> str | None:
    """Why `v` is not a URL of one of `schemes` (`scp`: or git's user@host:path); None when it is.
    A host in ASCII/IDNA form (gpuop.profile.bounded.host_problem), a port in 1..65535, no credentials (a
    user name only for ssh and git), no leading '-' anywhere a program could read an option, at most
    MAX_URL characters, no query or fragment. `secret`: where credentials go instead (the field's reference)."""
    if len(v) > MAX_URL:
        return f"is {len(v)} characters; a URL may hold at most {MAX_URL}"
    if not v.isascii() or _CONTROL.search(v):
        return "holds a space, a control character or a non-ASCII character (write a host in its IDNA form, xn--...)"
    m = re.fullmatch(r"([a-z][a-z0-9+.-]*)://([^/?#]*)(.*)", v)
    if m is None:
        if scp and "://" not in v:
            sm = re.fullmatch(r"([^@/:]+)@([^@/:]+):(.+)", v)
            if sm is None or not _USER.fullmatch(sm.group(1)):
                return "is not USER@HOST:PATH (a user of letters, digits, . _ -, not starting with '-')"
            problem = host_problem(sm.group(2))
            if problem:
                return problem
            if sm.group(3).startswith("-") or not re.fullmatch(r"[A-Za-z0-9._/~-]+", sm.group(3)):
                return "has a path that starts with '-' or holds characters other than letters, digits and . _ / ~ -"
            return None
        return "is not SCHEME://HOST[:PORT]/PATH"
    scheme, authority, rest = m.groups()
    if scheme not in schemes:
        return f"has scheme {scheme!r}; allowed: {', '.join(schemes)}"
    user, at, hostport = authority.rpartition("@")
    if at:
        if scheme not in ("ssh", "git") or ":" in user:
            return (f"holds credentials (USER:PASSWORD@), which would be committed to git in plain text and written "
                    f"into every object; {secret}")
        if not _USER.fullmatch(user):
            return "holds credentials or a user that is not letters, digits and . _ - (not starting with '-')"
    hm = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(:([0-9]*))?", hostport)
    if hm is None:
        return "has a malformed host or port"
    problem = host_problem(hm.group(1))
    if problem:
        return problem
    if hm.group(2) is not None and not (hm.group(3) and len(hm.group(3)) <= 5 and 1 <= int(hm.group(3)) <= 65535):
        return "has a port outside 1..65535"
    if "?" in rest or "#" in rest:
        return "has a query or fragment; allowed: a path only"
    if not _URL_PATH.fullmatch(rest):
        return ("has a path with characters other than letters, digits, %XX and . _ ~ + : @ = , ! - / "
                "(no '{', '}', '$', quotes or spaces: the path lands in templates and objects as it is)")
    return None


def shown_url(v: str) -> str:
    """A refused URL as a message may echo it: never a password into a CI log, at most 200 characters."""
    shown = re.sub(r"(?<=://)[^/@]*@", "***@", v)
    return shown if len(shown) <= 200 else shown[:200] + "..."


def url(schemes: tuple[str, ...], scp: bool = False, secret: str = SECRET_HINT):
    """The validator of a URL with one of `schemes` and a host; `scp`: also git's user@host:path form."""
    def check(v: str) -> str:
        problem = url_problem(v, schemes, scp, secret)
        if problem:
            forms = ", ".join(f"{s}://HOST/..." for s in schemes) + (", USER@HOST:PATH" if scp else "")
            raise ValueError(f"{shown_url(v)!r} is not an allowed URL: it {problem}; allowed: {forms}")
        return v
    return check


def Url(*schemes: str, secret: str = SECRET_HINT):   # noqa: N802 - a type, named like one
    """A URL field's type: the grammar above for `schemes` (the pattern is for editors, the check is url_problem)."""
    alternatives = "|".join(re.escape(s) for s in schemes)
    return Annotated[str, AfterValidator(url(schemes, secret=secret)),
                     Field(max_length=MAX_URL, json_schema_extra={"pattern": rf"^({alternatives})://[^\s@/?#]+(/[^\s?#]*)?$"})]


ProxyUrl = Url("http", "https")
ChartRepositoryUrl = Url("https", "oci")
# a chart repository of a cluster's delivery: its credentials have reference fields of their own
DeliveryChartUrl = Url("https", "oci", secret=SECRET_HINT + " (spec.delivery.credentials.<nfd|operator|dra>: "
                       "flux for Flux's secretRef, argocd for Argo CD's repository Secret)")

# docker/distribution reference/regexp.go: domain (components joined by '.', optional port), then path components
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
IMAGE_REPOSITORY = re.compile(rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]{{1,5}})?(?:/{_PATH_COMPONENT})*")
MAX_REPOSITORY = 255           # distribution's NameTotalLengthMax


def image_repository_problem(v: str) -> str | None:
    if len(v) > MAX_REPOSITORY:
        return f"is {len(v)} characters; an image repository may hold at most {MAX_REPOSITORY}"
    if not IMAGE_REPOSITORY.fullmatch(v):
        return ("is not REGISTRY[:PORT][/PATH]: a registry host of DNS labels, then path components of lowercase "
                "letters and digits joined by one of . _ __ - (the image reference grammar)")
    port = re.search(r":([0-9]+)", v)
    if port and not 1 <= int(port.group(1)) <= 65535:
        return "has a port outside 1..65535"
    if v.lower() != v:
        return "holds uppercase letters (a registry host is written in lowercase)"
    return None


def refusing(problem, shown: bool = True):
    """A field validator from a grammar's `problem(value) -> message | None`; `shown`: the message starts with the
    value (at most 200 characters of it)."""
    def check(v: str) -> str:
        found = problem(v)
        if found:
            raise ValueError(f"{v[:200]!r} {found}" if shown else found)
        return v
    return check


ImageRepository = Annotated[str, AfterValidator(refusing(image_repository_problem)), Field(
    max_length=MAX_REPOSITORY, json_schema_extra={"pattern": r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$"})]

# C0 controls but tab and newline, DEL, C1 controls (NEL among them), LS, PS, BOM, lone surrogates, the
# non-characters U+FFFE/U+FFFF: what a YAML stream may not hold, or YAML 1.1 reads as a line break and 1.2 does not
_NOT_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_LINE_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def text_problem(v: str) -> str | None:
    m = _NOT_TEXT.search(v)
    if m is None:
        return None
    what = "NUL" if m.group() == "\0" else f"U+{ord(m.group()):04X}"
    return (f"holds the control character {what} at offset {m.start()}; a container's args and env values may hold "
            "any text but control characters other than tab and newline")


Arg = Annotated[str, AfterValidator(refusing(text_problem, shown=False)), Field(max_length=4096)]
EnvValue = Annotated[str, AfterValidator(refusing(text_problem, shown=False)), Field(max_length=32768)]


def host_path_problem(v: str) -> str | None:
    if not v.startswith("/") or any(part == ".." for part in v.split("/")):
        return "is not an absolute host path (it must start with / and have no .. parts)"
    m = _LINE_CONTROL.search(v)
    if m is not None:
        return (f"holds the control character U+{ord(m.group()):04X}; a host path holds no newline, NUL or other "
                "control character")
    return None


HostPath = Annotated[str, AfterValidator(refusing(host_path_problem)),
                     AfterValidator(lambda v: v.rstrip("/") or "/"),      # /var/lib/kubelet/ is /var/lib/kubelet
                     Field(max_length=4096)]

NODE_GROUP = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._:/-]*[A-Za-z0-9])?")


def node_group_problem(v: str) -> str | None:
    if NODE_GROUP.fullmatch(v):
        return None
    return ("is not a node group name: letters, digits and . _ - : /, starting and ending with a letter or digit (no "
            "space, newline or other character)")


NodeGroupName = Annotated[str, AfterValidator(refusing(node_group_problem)), Field(
    min_length=1, max_length=253, json_schema_extra={"pattern": r"^[A-Za-z0-9]([A-Za-z0-9._:/-]*[A-Za-z0-9])?$"})]

NoProxyEntry = Annotated[str, Field(pattern=r"^[A-Za-z0-9.*\[\]:/_-]+$", max_length=253)]
