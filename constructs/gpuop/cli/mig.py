"""`gpuop mig gpus | check | show`: the MIG catalog and the layout checker on the command line.

    gpuop mig gpus                                              # models, PCI ids, MIG-capable, profiles (max)
    gpuop mig check --gpu MODEL PROFILE=COUNT...                # 0 valid, 2 invalid (reasons on stderr)
    gpuop mig show  --gpu MODEL PROFILE=COUNT... [--svg FILE]   # the placement, in the terminal and as SVG

Exit codes follow gpuop.cli: 0 valid, 2 invalid layout or bad input (one `gpuop mig: ...` line per reason
on stderr, no traceback), 1 a bug. Sources: catalog/data/gpus.yaml and mig.yaml (../shared/refs/mig/FACTS.md).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

catalog = geometry = picture = None   # imported by run(): `gpuop --help` and synth need not load them

_ENTRY = re.compile(r"^(?P<name>[^=\s]+)=(?P<count>.*)$")


class BadInput(Exception):
    """Bad command-line input: printed as `gpuop mig: <message>`, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mig_command", required=True, metavar="{gpus,check,show}")
    sub.add_parser("gpus", help="the GPU catalog: models, PCI ids, MIG capability, profiles with max counts")
    for name, text in (("check", "check a layout for one GPU (exit 0 valid, 2 invalid with the reasons)"),
                       ("show", "draw the layout's placement (terminal; --svg FILE for a picture)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--gpu", required=True, metavar="MODEL", help="GPU model (see `gpuop mig gpus`)")
        p.add_argument("layout", nargs="*", metavar="PROFILE=COUNT", help="e.g. 3g.40gb=1 1g.10gb=2")
        if name == "show":
            p.add_argument("--svg", type=Path, metavar="FILE", help="also write the picture as SVG")


def parse_layout(entries: list[str]) -> dict[str, int]:
    """['3g.40gb=1', '1g.10gb=2'] -> {'3g.40gb': 1, '1g.10gb': 2}; BadInput on malformed entries."""
    layout: dict[str, int] = {}
    for entry in entries:
        m = _ENTRY.match(entry)
        if m is None:
            raise BadInput(f"bad layout entry {entry!r}: write PROFILE=COUNT, e.g. 3g.40gb=1")
        name, count = m["name"], m["count"].strip()
        if not count.isdigit() or not count.isascii():
            raise BadInput(f"bad layout entry {entry!r}: COUNT must be a whole number >= 0, e.g. {name}=1")
        if name in layout:
            raise BadInput(f"profile {name} is given twice; give each profile once with its total count")
        layout[name] = int(count)
    return layout


def run(args) -> int:
    global catalog, geometry, picture
    from gpuop import catalog  # noqa: F811
    from gpuop.mig import geometry
    from gpuop.mig import picture  # noqa: F811
    try:
        if args.mig_command == "gpus":
            sys.stdout.write(gpus_table())
            return 0
        gpus = catalog.load().gpus
        if args.gpu not in gpus:  # the checker says the same; say it before parsing the layout
            raise BadInput(geometry.check_layout(args.gpu, {}, gpus=gpus).reasons[0])
        result = geometry.check_layout(args.gpu, parse_layout(args.layout), gpus=gpus)
    except BadInput as exc:
        print(f"gpuop mig: {exc}", file=sys.stderr)
        return 2
    for w in result.warnings:
        print(f"gpuop mig: warning: {w}", file=sys.stderr)
    if not result.ok:
        for reason in result.reasons:
            print(f"gpuop mig: {reason}", file=sys.stderr)
        return 2
    if args.mig_command == "check":
        if result.placement:
            print(f"{result.gpu}: {geometry.describe(result.layout)} fits: {', '.join(map(str, result.placement))}")
        else:
            print(f"{result.gpu}: empty layout fits (MIG on, no instances)")
        return 0
    sys.stdout.write(picture.text(result))
    if args.svg:
        try:
            args.svg.parent.mkdir(parents=True, exist_ok=True)
            args.svg.write_bytes(picture.svg(result).encode("utf-8"))
        except OSError as exc:
            print(f"gpuop mig: cannot write {args.svg}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"gpuop mig: wrote {args.svg}", file=sys.stderr)
    return 0


def gpus_table() -> str:
    """The GPU catalog: model, MIG-capable, profile family, PCI ids; below each MIG-capable model its
    profiles with max counts per GPU (and any superseded alternative name set)."""
    mig, gpus = geometry.load_mig(), catalog.load().gpus
    width = max(len(n) for n in gpus) + 2
    lines = [f"{'MODEL':<{width}}MIG  {'FAMILY':<16}PCI IDS"]
    for name, gpu in gpus.items():
        fam = geometry.family_of(name)
        lines.append(f"{name:<{width}}{'yes' if fam else 'no':<5}{fam.name if fam else '-':<16}"
                     + ",".join(gpu.pciDeviceIds))
        if fam is None:
            continue
        low = fam.confidence == "low" or getattr(gpu, "confidence", None) == "low"
        lines.append("    profiles (max): " + ", ".join(f"{p.name} x{p.max}" for p in fam.profiles)
                     + ("  [confidence: low]" if low else ""))
        for v in mig.variants(fam.name):
            lines.append(f"    {v.gpus}: " + ", ".join(f"{p.name} x{p.max}" for p in v.profiles))
    return "\n".join(lines) + "\n"
