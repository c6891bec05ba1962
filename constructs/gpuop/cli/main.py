"""The command line: argparse, and the one error boundary.

Exit codes: 0 ok, 2 bad input (every problem printed as FILE:LINE:COL: field.path: message), 1 a bug
in gpuop ("please report"; the traceback only with -v), 3 changes found (`diff --exit-code`: the next
synth would change the output; `check`: the committed output is stale). Nothing below this module
parses arguments.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import NoReturn

from gpuop import __version__
from gpuop.errors import UserError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuop", description="Compile GPU cluster profiles into Helm charts, "
                                "Kustomize overlays, Argo CD and Flux objects.")
    p.add_argument("--version", action="version", version=f"gpuop {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="show tracebacks of internal errors")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("synth", help="compile profiles into the output folder")
    s.add_argument("paths", nargs="*", type=Path, help="profile files or folders (default: profiles)")
    s.add_argument("-o", "--output", type=Path, default=Path("dist"), help="output folder (default: dist)")
    s.add_argument("--settings", type=Path, default=Path("gpuop.yaml"), help="settings file (default: gpuop.yaml)")
    s.add_argument("-j", "--jobs", type=_jobs, default=0, help="worker processes (default: auto, by fleet size)")
    s.add_argument("--cache", type=Path, default=Path(".gpuop-cache"),
                   help="build cache folder (default: .gpuop-cache); unchanged clusters are reused from it")
    s.add_argument("--no-cache", action="store_true", help="build every cluster; neither read nor write the cache")
    s.add_argument("--shard", type=_shard, help="K/N: build only shard K of N (merge shards with `gpuop merge`)")
    s.add_argument("--previous", type=Path, help="last output whose version lock and chart history the compile "
                   "continues (default: the output folder; with --shard, the settings' gitops.path folder, e.g. dist)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    d = sub.add_parser("diff", help="what the engines would add, change or delete, per cluster (no cluster needed)")
    d.add_argument("paths", nargs="*", type=Path)
    d.add_argument("--against", default=None, help="last compiled output: a folder or a git revision "
                   "(its output folder is read; default: the output folder on disk)")
    d.add_argument("--exit-code", action="store_true", help="exit 3 when something would change, 0 when not")
    d.add_argument("--impact", action="store_true", help="what the change does on the GPU nodes, per cluster and "
                   "pool (driver reinstalls, MIG reconfiguration, restarts), destructive first")
    d.add_argument("--format", choices=("text", "json"), default="text", help="with --impact: text or json")
    d.add_argument("-o", "--output", type=Path, default=Path("dist"), help="output folder whose lock and "
                   "packaged charts the new compile continues from (default: dist)")
    d.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    pb = sub.add_parser("publish", help="push the packaged charts to an OCI registry")
    pb.add_argument("--oci", required=True, help="oci://HOST[:PORT]/PATH")
    pb.add_argument("--plain-http", action="store_true", help="registry without TLS (e.g. on loopback)")
    pb.add_argument("--sign-key", type=Path, default=None, help="cosign private key file (cosign generate-key-pair) "
                    "signing each chart; required when the settings configure signing (its password: the "
                    "environment variable signing.passwordEnv names)")
    pb.add_argument("--settings", type=Path, default=None, help="settings file (default: gpuop.yaml when present)")
    pb.add_argument("dist", nargs="?", type=Path, default=Path("dist"))
    m = sub.add_parser("merge", help="merge the output folders of `synth --shard` runs into one")
    m.add_argument("shards", nargs="+", type=Path)
    m.add_argument("-o", "--output", type=Path, default=Path("dist"))
    m.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    v = sub.add_parser("validate", help="check profiles and settings, or a compiled output folder; write nothing")
    v.add_argument("paths", nargs="*", type=Path)
    v.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    v.add_argument("--against", default=None, help="an output folder: check only the clusters that changed against "
                   "this git revision (default: every cluster's objects, and the clusters that differ from origin/HEAD, "
                   "else HEAD, are compiled and compared)")
    v.add_argument("--all", action="store_true", help="an output folder: compile and compare every cluster")
    ck = sub.add_parser("check", help="the review gate in one process: stale check, semantic diff against the base "
                        "revision (destructive first), validation of what changed; exit 3 when the output is stale")
    ck.add_argument("paths", nargs="*", type=Path, help="profile folders (default: profiles)")
    ck.add_argument("--against", default=None, help="base git revision, e.g. origin/main: clusters whose inputs and "
                    "committed output equal it are proven unchanged without compiling")
    ck.add_argument("--all", action="store_true", help="check every cluster (the nightly run)")
    ck.add_argument("--rehearse", action="store_true", help="then rehearse the clusters whose output the change "
                    "touches on a real control plane with a simulated GPU fleet (gpuop rehearse); exit 3 when one "
                    "differs from its plan")
    ck.add_argument("-o", "--output", type=Path, default=Path("dist"), help="committed output folder (default: dist)")
    ck.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    from gpuop.cli import mig as mig_cli

    mig_cli.add_arguments(sub.add_parser("mig", help="MIG geometry: list GPUs, check and draw layouts"))
    cp = sub.add_parser("capacity", help="what each pool advertises (nvidia.com/gpu, MIG, shared), per node and total")
    cp.add_argument("paths", nargs="*", type=Path)
    cp.add_argument("--format", choices=("table", "json"), default="table")
    rh = sub.add_parser("rehearse", help="apply each cluster's compiled output to a real Kubernetes control plane "
                        "on loopback with a simulated (kwok) GPU fleet, and check it against the plan")
    rh.add_argument("clusters", nargs="*", help="cluster names (default: every cluster of the profiles)")
    rh.add_argument("--profiles", type=Path, action="append", default=None,
                    help="profile files or folders (repeatable; default: profiles)")
    rh.add_argument("-o", "--output", type=Path, default=Path("dist"), help="compiled output folder (default: dist)")
    rh.add_argument("--format", choices=("table", "json"), default="table")
    rp = sub.add_parser("report", help="write a static HTML page of the fleet to report/index.html (outside dist/)")
    rp.add_argument("paths", nargs="*", type=Path)
    rp.add_argument("--against", default=None, help="also show what the next synth changes against this folder or "
                    "git revision, with its impact on the nodes")
    rp.add_argument("-o", "--output", type=Path, default=Path("dist"), help="compiled output folder to read "
                    "(default: dist); the report is never written into it")
    rp.add_argument("--to", type=Path, default=None, help="the page to write, an .html file inside the project "
                    "and outside the output (default: report/index.html beside the settings file)")
    rp.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    im = sub.add_parser("import", help="an operator values.yaml or ClusterPolicy (+ NVIDIADriver CRs) -> a profile",
                        description="What a cluster runs today (NVIDIA's gpu-operator chart values, or a ClusterPolicy "
                        "with its NVIDIADriver CRs and ConfigMaps) -> a gpuop profile in operator mode, compiled "
                        "before it is written.",
                        epilog="Exit codes: 0 a profile written (or, with --check, nothing differs); 2 bad input, "
                        "located (unreadable input, a profile gpuop refuses, a chart template that fails, an -o "
                        "that would overwrite); 3 with --check, differences found; 1 only for a bug in gpuop.")
    im.add_argument("files", nargs="+", type=Path)
    im.add_argument("-o", "--output", type=Path, default=None, help="the profile to write (inside the project; "
                    "default: stdout); an existing file is kept unless --force")
    im.add_argument("--force", action="store_true", help="replace the profile -o names if it exists")
    im.add_argument("--check", action="store_true", help="compile the imported profile (or --profile) in operator "
                    "mode, render NVIDIA's whole chart with the live values and with gpuop's and print every "
                    "difference, one located line each: ClusterPolicy, NVIDIADriver CRs, ConfigMaps, NFD subchart, "
                    "NodeFeatureRules, the operator Deployment, RBAC (exit 0: none, 3: some)")
    im.add_argument("--profile", type=Path, default=None, help="with --check: compare this profile (e.g. the "
                    "imported one after hand edits) instead of a new import; its errors are located in it")
    im.add_argument("--operator-renderer", type=Path, default=None, help="with --check: NVIDIA's operator code as "
                    "a renderer (the nvidia-operator tool's render.sh; default: $GPUOP_NVIDIA_OPERATOR_RENDER): also "
                    "compare the operands it creates from each side (DaemonSets, ConfigMaps, RBAC, node labels)")
    im.add_argument("--chart", type=Path, default=None, help="with --check: NVIDIA's gpu-operator chart folder "
                    "(default: $GPUOP_NVIDIA_CHART)")
    im.add_argument("--accept-unexpressed", action="store_true", help="with --check: differences at settings the "
                    "profile cannot express (listed in its comments) do not count")
    im.add_argument("--chart-defaults", type=Path, default=None, help="NVIDIA's chart values.yaml of the operator "
                    "version (`helm show values`): settings equal to it are not reported")
    ig = sub.add_parser("images", help="list every image the clusters use; `images resolve --registry URL` "
                        "fills a digest lock (spec.images.digestLock) from a registry", add_help=False)
    ig.add_argument("-h", "--help", action="store_true", help="show the images command's help")
    ig.add_argument("rest", nargs=argparse.REMAINDER, help="[resolve --registry URL] [PATHS...]; -h for more")
    sc = sub.add_parser("schema", help="write the JSON Schemas of profiles and chart values")
    sc.add_argument("-o", "--output", type=Path, default=Path("schemas"))
    it = sub.add_parser("init", help="write a starter project: settings, an example profile and its schema, "
                        "package.json for Node and the cdk8s CLI, .gitignore, the CI review gate")
    it.add_argument("dir", nargs="?", type=Path, default=Path("."), help="project folder (default: the current one)")
    return p


def _jobs(text: str) -> int:
    if text == "auto":
        return 0
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive number or auto")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, 600]")
    return value


def _shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{text!r}: K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


def _paths(args) -> list[Path]:
    return args.paths or [Path("profiles")]


def cmd_synth(args) -> int:
    from gpuop.pipeline import synth

    return synth.run(synth.Request(
        paths=tuple(_paths(args)), output=args.output, settings=args.settings,
        cache_dir=None if args.no_cache else args.cache, jobs=args.jobs, shard=args.shard, previous=args.previous,
        progress=not args.no_progress), lambda line: print(line, file=sys.stderr))


def _settle_journal(out: Path, strict: bool) -> None:
    """Before a command reads an output: a commit a stopped synth left half done (its journal in the output,
    pipeline/journal.py) is completed under the output lock; `strict` commands (validate, check,
    diff --exit-code) refuse it instead, so a half-applied tree never passes the gate."""
    from gpuop.errors import Issue
    from gpuop.pipeline import journal
    from gpuop.pipeline.write import output_lock

    if not journal.pending(out):
        return
    if strict:
        journal.load(out)           # a journal no gpuop run wrote (a committed one) says so: exit 2, nothing moved
        raise UserError(Issue(str(out / journal.JOURNAL), 0, 0, "", f"{out} holds an unfinished commit (a gpuop synth "
                              "was stopped or is running); run gpuop synth to complete it, then check again (a journal is never "
                              "committed: if git tracks it, git rm it)"))
    with output_lock(out):          # recover() completes it
        pass


def cmd_diff(args) -> int:
    from gpuop.ops.diff import run

    _settle_journal(args.output, strict=args.exit_code)

    if args.impact:
        from gpuop.ops import impact

        text, changed = impact.run(_paths(args), args.against, args.output, args.settings, args.format)
        sys.stdout.write(text)
        return CHANGES_FOUND if args.exit_code and changed else 0
    from gpuop.ops.impact import impact

    text, changed = run(_paths(args), args.against, args.output, args.settings, effects=impact)
    sys.stdout.write(text)
    return CHANGES_FOUND if args.exit_code and changed else 0


CHANGES_FOUND = 3       # `diff --exit-code`, `check`: distinct from 1 (a bug) and 2 (bad input)


def cmd_check(args) -> int:
    from gpuop.errors import Issue
    from gpuop.ops import check

    if args.against is None and not args.all:
        raise UserError(Issue("check", 0, 0, "", "pass --against REV (the base branch, e.g. origin/main) or --all"))
    _settle_journal(args.output, strict=True)
    return check.run(_paths(args), args.against, args.output, args.settings, args.all, timings=args.verbose,
                     then=_rehearse_touched(args.output) if args.rehearse else None)


def _rehearse_touched(output: Path):
    """`check --rehearse`: the clusters whose committed output the change touches (gate.rehearsal_targets),
    rehearsed as `gpuop rehearse` does; 0 as planned or nothing to rehearse, 3 one differs from its plan."""
    def rehearse(sel) -> int:
        from gpuop.pipeline import gate
        from gpuop.pipeline.run import plan_all
        from gpuop.rehearse import report, run

        names = gate.rehearsal_targets(sel)
        print(f"gpuop check: rehearsing {len(names)} cluster(s) whose output the change touches"
              + (": " + ", ".join(names) if names else ""), file=sys.stderr)
        if not names:
            return 0
        plans, _ = plan_all([sel.current[n][0] for n in names])
        results = run.rehearse(run.select(plans, list(names)), output)
        sys.stdout.write(report.render(results, "table"))
        return report.exit_code(results)
    return rehearse


def cmd_publish(args) -> int:
    from gpuop.ops.publish import publish_oci, summary

    _settle_journal(args.dist, strict=True)        # never publish from a half-applied output
    outcomes, issues = publish_oci(args.dist, args.oci, plain_http=args.plain_http, sign_with=_sign_with(args))
    for o in outcomes:
        print(f"gpuop: {o.chart} {o.version}: {o.action}{', ' + o.signature if o.signature else ''}", file=sys.stderr)
    for issue in issues:
        print(issue, file=sys.stderr)
    print(summary(outcomes), file=sys.stderr)     # exactly what the registry now holds: never "nothing written"
    return 2 if issues else 0


def _sign_with(args):
    """How publish signs: settings `signing` and --sign-key go together (Flux verifies exactly what the
    settings say is signed: an unsigned chart would be refused by every cluster, a signature nobody checks
    is a false assurance)."""
    from gpuop.errors import Issue
    from gpuop.ops.publish import SignWith
    from gpuop.profile.load import display
    from gpuop.profile.settings import load_settings

    path = args.settings if args.settings is not None else Path("gpuop.yaml")
    signing = load_settings(path).signing if args.settings is not None or path.is_file() else None
    if signing is not None and args.sign_key is None:
        raise UserError(Issue(display(path), 0, 0, "signing", "signing is configured, so every OCIRepository verifies "
                              "the charts (spec.verify); pass --sign-key FILE (the cosign private key)"))
    if signing is None and args.sign_key is not None:
        raise UserError(Issue("--sign-key", 0, 0, "", f"{display(path)} configures no signing (add signing."
                              "publicKeySecret, the Secret Flux verifies with, and recompile); refusing to sign "
                              "what no OCIRepository verifies"))
    return None if signing is None else SignWith(args.sign_key, signing.passwordEnv)


def cmd_merge(args) -> int:
    from gpuop.pipeline.shards import merge_shards
    from gpuop.pipeline.ownership import check_target
    from gpuop.pipeline.previous import read_previous
    from gpuop.pipeline.write import output_lock, write_tree

    from gpuop.profile.settings import load_settings

    settings = load_settings(args.settings)
    project = args.settings.absolute().parent
    check_target(args.output, project, tuple(args.shards) + (args.settings,), settings.gitops.repoURL)
    with output_lock(args.output):
        check_target(args.output, project, tuple(args.shards) + (args.settings,), settings.gitops.repoURL)
        files, names = merge_shards(args.shards, settings)
        before = set(read_previous(args.output).index)
        write_tree(args.output, files, project=project, repo=settings.gitops.repoURL)
    for name in sorted(before - set(names)):
        print(f"gpuop: cluster {name} removed: Argo CD / Flux will delete its GPU stack", file=sys.stderr)
    print(f"gpuop: merged {len(args.shards)} shard(s) into {args.output}", file=sys.stderr)
    return 0


def cmd_validate(args) -> int:
    from gpuop.verify.output import digest_issues, is_output, tree_issues, validate_output
    from gpuop.errors import Issue
    from gpuop.pipeline.run import plan_all
    from gpuop.profile.settings import load_settings

    outputs = [p for p in args.paths if is_output(p)]
    profiles = [p for p in args.paths if not is_output(p)]
    issues: list[Issue] = []
    notes: dict = {}
    for out in outputs:
        from gpuop.outputs.cluster import disk_tree_digest
        from gpuop.pipeline.integrity import output_issues
        from gpuop.pipeline.previous import read_index

        _settle_journal(out, strict=True)

        found = output_issues(out)          # a bogus index.json is exit 2 here, before anything reads it
        # the tree itself (no link, nothing unlisted) before anything is compiled or read from it; with --against
        # the gate proves it from what git saw change, at the cost of the change (gate._unwritten)
        if not args.against:
            found = found or tree_issues(out, read_index(out))
        found = found or _provenance_issues(args, out, notes)
        only = notes.pop("only", None)
        # each cluster folder against its recorded treeDigest when no compile compared it file by file
        alone = not args.against and not (Path("profiles").is_dir() and args.settings.is_file())
        issues += found or (validate_output(out, only=only) +
                            (digest_issues(out, read_index(out), disk_tree_digest) if alone else []))
    plans, warnings = [], []
    if profiles or not outputs:
        try:
            load_settings(args.settings)
        except UserError as exc:
            issues += exc.issues
        try:
            plans, warnings = plan_all(profiles or [Path("profiles")])
        except UserError as exc:
            issues += exc.issues
    if issues:
        raise UserError(issues)
    for w in warnings:
        print(w, file=sys.stderr)
    what = [f"{len(plans)} profile(s)"] if profiles or not outputs else []
    what += [f"output {o}" for o in outputs]
    print(f"gpuop: {' and '.join(what)} valid{notes.get('tail', '')}", file=sys.stderr)
    return 0


def _provenance_issues(args, out: Path, notes: dict) -> list:
    """An output is valid only if it is what its inputs compile to: the clusters that differ from the base
    (HEAD by default, --against REV; every one when not in git, or --all) are compiled and compared
    (pipeline/gate.py). Skipped, and said so, when the project's profiles or settings are not here (an
    output validated on its own)."""
    from gpuop.pipeline import gate
    from gpuop.profile.settings import load_settings

    profiles = Path("profiles")
    if not (profiles.is_dir() and args.settings.is_file()):
        notes["tail"] = f" (not compared with its inputs: no {profiles}/ and {args.settings} here)"
        return []
    settings = load_settings(args.settings)
    sel = gate.select([profiles], out, settings, args.against or gate.default_base(), args.all)
    if args.against:
        notes["only"] = frozenset(sel.clusters)
    stale, _ = gate.verify(sel, [profiles], out, settings)
    notes["tail"] = f" ({len(sel.clusters)} cluster(s) compiled and compared, {sel.proven} proven from the base)"
    return gate.stale_issues(stale, out)


def cmd_capacity(args) -> int:
    from gpuop.ops.capacity import render
    from gpuop.pipeline.run import plan_all

    plans, _ = plan_all(_paths(args))
    sys.stdout.write(render(plans, args.format))
    return 0


def cmd_rehearse(args) -> int:
    from gpuop.pipeline.run import plan_all
    from gpuop.rehearse import report, run

    plans, _ = plan_all(args.profiles or [Path("profiles")])
    results = run.rehearse(run.select(plans, args.clusters), args.output)
    sys.stdout.write(report.render(results, args.format))
    return report.exit_code(results)


def cmd_report(args) -> int:
    from gpuop.ops.report import run

    _settle_journal(args.output, strict=False)
    target = run(_paths(args), args.against, args.output, args.settings, args.to)
    print(f"gpuop: wrote {target}", file=sys.stderr)
    return 0


def cmd_schema(args) -> int:
    from gpuop.profile.models import profile_json_schema
    from gpuop.outputs.values import values_schema
    from gpuop.kube.yamlio import dump_json

    from gpuop.errors import Issue

    try:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "profile.schema.json").write_text(dump_json(profile_json_schema()))
        (args.output / "values.schema.json").write_text(dump_json(values_schema()))
    except OSError as exc:      # -o names a file, or the place is unwritable: the place, not gpuop
        what = "is a file, not a folder" if args.output.is_file() else f"cannot be written: {exc.strerror or exc}"
        raise UserError(Issue(str(args.output), 0, 0, "", f"{what}; pass the folder the two schemas go into "
                              "(e.g. -o schemas)"))
    print(f"gpuop: wrote {args.output}/profile.schema.json and values.schema.json", file=sys.stderr)
    return 0


def cmd_init(args) -> int:
    from gpuop.ops import init

    return init.main(args.dir)


def cmd_import(args) -> int:
    from gpuop.ops.importer import ProfileRefused, run

    try:
        text, code = run(args.files, args.output, chart_defaults=args.chart_defaults, force=args.force,
                         check=args.check, chart=args.chart, accept_unexpressed=args.accept_unexpressed,
                         profile=args.profile, renderer=args.operator_renderer)
    except ProfileRefused as exc:       # the refused profile on stdout: its errors' lines point into it
        sys.stdout.write(exc.text)
        raise
    sys.stdout.write(text)
    return code


def cmd_mig(args) -> int:
    from gpuop.cli import mig as mig_cli

    return mig_cli.run(args)


def _interrupted(args) -> str:
    """What Ctrl-C kept: the output folder is the previous tree or, once the exchange happened, the new one."""
    out = getattr(args, "output", None)
    if args.command not in ("synth", "merge") or out is None:
        return "gpuop: interrupted"
    from gpuop.pipeline import journal
    from gpuop.pipeline.write import committed

    if journal.pending(Path(out)):
        return (f"gpuop: interrupted during the commit of {out}: every cluster folder is whole, and the next gpuop "
                "command completes the commit")
    if committed():
        return f"gpuop: interrupted after the new {out} was in place; it is whole (only the old tree's removal was cut short)"
    return f"gpuop: interrupted; {out} was not changed (the previous tree is kept)"


def _images_parser(resolve: bool) -> argparse.ArgumentParser:
    ip = argparse.ArgumentParser(prog="gpuop images resolve" if resolve else "gpuop images", description=(
        "Fill a digest lock from a registry (every image the profiles use must be there)." if resolve else
        "Print every image each cluster's manifests use (dist/<cluster>/images.txt), one `cluster<TAB>image` a line."))
    ip.add_argument("paths", nargs="*", type=Path, help="profiles or folders (default: profiles)")
    if resolve:
        ip.add_argument("--registry", required=True, help="[http[s]://]HOST[:PORT][/PATH] holding the images")
        ip.add_argument("--plain-http", action="store_true", help="registry without TLS (e.g. on loopback)")
        ip.add_argument("--lock", type=Path, default=Path("images.lock.json"), help="the digest lock to write "
                        "(default: images.lock.json); profiles pin with spec.images.digestLock")
        ip.add_argument("--verify-key", type=Path, default=None, help="cosign public key: every image's signature "
                        "is verified with it (offline, at the digest resolved) before the lock is written")
        ip.add_argument("--timeout", type=_seconds, default=30.0, help="seconds one registry request may take, "
                        "connect, headers and body together (default: 30)")
    return ip


def cmd_images(args) -> int:
    from gpuop.ops import images

    resolve = bool(args.rest) and args.rest[0] == "resolve"
    a = _images_parser(resolve).parse_args((args.rest[1:] if resolve else args.rest) + (["-h"] if args.help else []))
    paths = a.paths or [Path("profiles")]
    if resolve:
        found = images.resolve(paths, a.registry, a.lock, a.plain_http, timeout=a.timeout, verify_key=a.verify_key)
        print(f"gpuop: {len(found)} image digest{'s' if len(found) != 1 else ''} written to {a.lock}",
              file=sys.stderr)
        return 0
    for cluster, refs in images.list_images(paths).items():
        for ref in refs:
            print(f"{cluster}\t{ref}")
    return 0


COMMANDS = {"images": cmd_images, "synth": cmd_synth, "validate": cmd_validate, "schema": cmd_schema, "mig": cmd_mig,
            "merge": cmd_merge, "publish": cmd_publish, "diff": cmd_diff, "capacity": cmd_capacity,
            "rehearse": cmd_rehearse, "report": cmd_report, "import": cmd_import, "init": cmd_init, "check": cmd_check}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if any(k in os.environ for k in ("GPUOP_KILL_AT", "GPUOP_TEST_NO_EXCHANGE")):
        # the crash-safety tests' hooks, injected into the writer here: the library reads no environment
        from gpuop.pipeline import write

        write.use_hooks(write.Hooks.from_env())
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        for issue in exc.issues:
            print(issue, file=sys.stderr)
        n = len(exc.issues)
        print(f"gpuop: {n} error{'s' if n != 1 else ''}; nothing written", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(_interrupted(args), file=sys.stderr)
        return 130
    except Exception as exc:  # the bug boundary
        if args.verbose:
            traceback.print_exc()
        print(f"gpuop: internal error: {type(exc).__name__}: {exc}\n"
              "This is a bug in gpuop; please report it with the command and profiles that caused it"
              + ("" if args.verbose else " (run with -v for the traceback)") + ".", file=sys.stderr)
        return 1


def entry(argv: list[str] | None = None) -> NoReturn:
    """The `gpuop` process: main(), then the exit without the interpreter's teardown, which frees every object
    one by one (a second for the index of a 10,000-cluster fleet, after all the work is done). Output streams
    are flushed and atexit handlers run first (multiprocessing's and tempfile's cleanups); with a thread still
    running, or a tracer or profiler (coverage, cProfile: they write their data at the normal exit), the normal
    exit instead."""
    code = main(argv)
    if threading.active_count() > 1 or sys.gettrace() is not None or sys.getprofile() is not None:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):     # a closed pipe: what the normal exit reports as 120
            code = code or 120
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    entry()
