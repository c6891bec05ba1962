"""The command line: argparse, and the one error boundary.

Exit codes: 0 ok, 2 bad input (every problem printed as FILE:LINE:COL: field.path: message), 1 a bug
in gpuop ("please report"; the traceback only with -v). Nothing below this module parses arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from gpuop import __version__  # noqa: E402
from gpuop.errors import UserError  # noqa: E402


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
    s.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal)")
    d = sub.add_parser("diff", help="what the engines would add, change or delete, per cluster (no cluster needed)")
    d.add_argument("paths", nargs="*", type=Path)
    d.add_argument("--against", default="dist", help="last compiled output: a folder or a git revision "
                   "(its dist/ folder is read; default: the folder dist)")
    d.add_argument("-o", "--output", type=Path, default=Path("dist"), help="output folder whose lock and "
                   "packaged charts the new compile continues from (default: dist)")
    d.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    pb = sub.add_parser("publish", help="push the packaged charts to an OCI registry")
    pb.add_argument("--oci", required=True, help="oci://HOST[:PORT]/PATH")
    pb.add_argument("--plain-http", action="store_true", help="registry without TLS (e.g. on loopback)")
    pb.add_argument("dist", nargs="?", type=Path, default=Path("dist"))
    m = sub.add_parser("merge", help="merge the output folders of `synth --shard` runs into one")
    m.add_argument("shards", nargs="+", type=Path)
    m.add_argument("-o", "--output", type=Path, default=Path("dist"))
    m.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    v = sub.add_parser("validate", help="check profiles and settings, or a compiled output folder; write nothing")
    v.add_argument("paths", nargs="*", type=Path)
    v.add_argument("--settings", type=Path, default=Path("gpuop.yaml"))
    from gpuop.cli import mig as mig_cli

    mig_cli.add_arguments(sub.add_parser("mig", help="MIG geometry: list GPUs, check and draw layouts"))
    sc = sub.add_parser("schema", help="write the JSON Schemas of profiles and chart values")
    sc.add_argument("-o", "--output", type=Path, default=Path("schemas"))
    return p


def _jobs(text: str) -> int:
    if text == "auto":
        return 0
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive number or auto")
    return int(text)


def _shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{text!r}: K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


def _paths(args) -> list[Path]:
    return args.paths or [Path("profiles")]


def cmd_synth(args) -> int:
    from gpuop.pipeline.run import compile_profiles, plan_all
    from gpuop.profile.settings import load_settings
    from gpuop.pipeline.write import check_target, read_previous, write_tree

    try:
        settings = load_settings(args.settings)
    except UserError as exc:          # report the profiles' problems too, as validate does
        issues = list(exc.issues)
        try:
            plan_all(_paths(args))
        except UserError as more:
            issues += more.issues
        raise UserError(issues)
    check_target(args.output)
    previous = read_previous(args.output)
    if previous.charts and not previous.lock.get("clusters"):
        print(f"{args.output}: warning: packaged charts but no version lock ({args.output}/versions.lock.json): chart "
              "versions restart at 0.1.0, and a Flux HelmRelease on a Git source (reconcileStrategy ChartVersion) "
              "or an Argo CD Helm-repository source that already has 0.1.0 will not upgrade; restore the lock from "
              "git", file=sys.stderr)
    result = compile_profiles(_paths(args), settings, previous, jobs=args.jobs,
                              cache_dir=None if args.no_cache else args.cache, shard=args.shard,
                              progress=not args.no_progress)
    for w in result.warnings:
        print(w, file=sys.stderr)
    write_tree(args.output, result.files, result.reuse)
    shard = f" (shard {args.shard[0]}/{args.shard[1]})" if args.shard else ""
    print(f"gpuop: compiled {len(result.names)} cluster(s){shard} into {args.output} "
          f"({result.built} built, {len(result.names) - result.built} unchanged)", file=sys.stderr)
    return 0


def cmd_diff(args) -> int:
    from gpuop.ops.diff import diff_trees, render, tree_from_dir, tree_from_git
    from gpuop.pipeline.run import compile_profiles
    from gpuop.profile.settings import load_settings
    from gpuop.pipeline.write import read_previous

    settings = load_settings(args.settings)
    against = Path(args.against)
    old = tree_from_dir(against) if against.is_dir() else tree_from_git(args.against, str(args.output).rstrip("/"))
    result = compile_profiles(_paths(args), settings, read_previous(args.output), cache_dir=Path(".gpuop-cache"),
                              progress=False, reuse=False)
    new = {k: (v.encode() if isinstance(v, str) else v) for k, v in result.files.items()}
    sys.stdout.write(render(diff_trees(old, new)))
    return 0


def cmd_publish(args) -> int:
    from gpuop.ops.publish import publish_oci

    for o in publish_oci(args.dist, args.oci, plain_http=args.plain_http):
        print(f"gpuop: {o.chart} {o.version}: {o.action}", file=sys.stderr)
    return 0


def cmd_merge(args) -> int:
    from gpuop.pipeline.shards import merge_shards
    from gpuop.pipeline.write import write_tree

    from gpuop.profile.settings import load_settings

    files = merge_shards(args.shards, load_settings(args.settings))
    write_tree(args.output, files)
    print(f"gpuop: merged {len(args.shards)} shard(s) into {args.output}", file=sys.stderr)
    return 0


def cmd_validate(args) -> int:
    from gpuop.verify.output import is_output, validate_output
    from gpuop.errors import Issue
    from gpuop.pipeline.run import plan_all
    from gpuop.profile.settings import load_settings

    outputs = [p for p in args.paths if is_output(p)]
    profiles = [p for p in args.paths if not is_output(p)]
    issues: list[Issue] = []
    for out in outputs:
        issues += validate_output(out)
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
    print(f"gpuop: {' and '.join(what)} valid", file=sys.stderr)
    return 0


def cmd_schema(args) -> int:
    from gpuop.profile.models import profile_json_schema
    from gpuop.outputs.values import values_schema
    from gpuop.kube.yamlio import dump_json

    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "profile.schema.json").write_text(dump_json(profile_json_schema()))
    (args.output / "values.schema.json").write_text(dump_json(values_schema()))
    print(f"gpuop: wrote {args.output}/profile.schema.json and values.schema.json", file=sys.stderr)
    return 0


def cmd_mig(args) -> int:
    from gpuop.cli import mig as mig_cli

    return mig_cli.run(args)


COMMANDS = {"synth": cmd_synth, "validate": cmd_validate, "schema": cmd_schema, "mig": cmd_mig,
            "merge": cmd_merge, "publish": cmd_publish, "diff": cmd_diff}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        for issue in exc.issues:
            print(issue, file=sys.stderr)
        n = len(exc.issues)
        print(f"gpuop: {n} error{'s' if n != 1 else ''}; nothing written", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the bug boundary
        if args.verbose:
            traceback.print_exc()
        print(f"gpuop: internal error: {type(exc).__name__}: {exc}\n"
              "This is a bug in gpuop; please report it with the command and profiles that caused it"
              + ("" if args.verbose else " (run with -v for the traceback)") + ".", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
