"""Pictures of a MIG placement: the GPU's slots and where each instance sits.

`text(result)`: plain ASCII for the terminal (no colour needed): a slot ruler, one row of boxes with a
letter per instance, and a legend. `svg(result)`: a standalone SVG for design reviews: the same row of
slots with labelled instance boxes (exactly one <rect> per instance, each with a <title>), free slots
shaded, and a legend. Both are deterministic: same result, same bytes.

Sources: the placement comes from geometry.check_layout (catalog/data/mig.yaml, ../shared/refs/mig/
FACTS.md §4-§5); slots are the `nvidia-smi mig -lgipp` placement units of FACTS.md §4.
"""

from __future__ import annotations

import textwrap
from xml.sax.saxutils import escape

from gpuop.mig.geometry import Instance, Result, describe

#: light fills, dark text on top stays readable; chosen per profile in the family's table order
PALETTE = ("#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0", "#fde0ef",
           "#d9f0a3", "#bcbddc", "#fee391", "#c6dbef", "#f2f0f7")
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"


def _keys(result: Result) -> list[tuple[str, Instance]]:
    if not result.ok or result.family is None:
        raise ValueError("only a valid layout has a placement to draw")
    return [(chr(ord("A") + i), inst) for i, inst in enumerate(result.placement)]


def _free(result: Result) -> list[int]:
    return [u for u in range(result.family.units)
            if not any(i.start <= u < i.start + i.size for i in result.placement)]


def _span(inst: Instance, unit: str) -> str:
    end = inst.start + inst.size - 1
    return f"{unit}{'s' if end != inst.start else ''} {inst.start}" + (f"-{end}" if end != inst.start else "")


def _legend(result: Result) -> list[str]:
    fam = result.family
    out = []
    for key, inst in _keys(result):
        p = fam.profile(inst.profile)
        extra = f"; {p.media}" if p.media else ""
        out.append(f"{key}  {inst.profile}: {_span(inst, fam.unit)}, {inst.compute} compute "
                   f"slice{'s' if inst.compute != 1 else ''}{extra}")
    free = _free(result)
    out.append(f"free {fam.unit}s: {', '.join(map(str, free)) if free else 'none'}")
    return out


def _header(result: Result) -> tuple[str, str]:
    fam = result.family
    return (f"{result.gpu}: {describe(result.layout)}",
            f"{fam.name}: {fam.units} {fam.unit}s, {fam.computeSlices} compute slices; "
            "one valid placement (NVML chooses the actual one)")


def text(result: Result) -> str:
    """The placement as plain ASCII lines."""
    keys, fam = _keys(result), result.family
    w = max(6, 64 // fam.units)
    width = fam.units * w + 1
    cells: list[tuple[int, int, str]] = [(i.start, i.size, f" {k} {i.profile}") for k, i in keys]
    cells += [(u, 1, " free" if w >= 6 else " .") for u in _free(result)]
    border, row = [" "] * width, [" "] * width
    for start, size, label in sorted(cells):
        a, b = start * w, (start + size) * w
        border[a:b + 1] = ["+"] + ["-"] * (b - a - 1) + ["+"]
        inner = label if len(label) <= b - a - 1 else label[:3].rstrip()
        row[a:b + 1] = ["|"] + list(inner.ljust(b - a - 1)) + ["|"]
    ruler = [" "] * width
    for u in range(fam.units):
        for j, ch in enumerate(str(u)):
            ruler[u * w + w // 2 + j] = ch
    pad = " " * 2
    lines = [*_header(result), "", pad + "".join(ruler).rstrip() + f"   ({fam.unit}s)", pad + "".join(border),
             pad + "".join(row), pad + "".join(border), ""]
    lines += [pad + line for line in _legend(result)]
    return "\n".join(lines) + "\n"  # warnings are the caller's to print


def svg(result: Result) -> str:
    """The placement as a standalone SVG document (UTF-8 text)."""
    keys, fam = _keys(result), result.family
    cell = 720 // fam.units
    left, top, height = 30, 112, 92
    width = left * 2 + cell * fam.units
    legend = _legend(result)
    colour = {p.name: PALETTE[i % len(PALETTE)] for i, p in enumerate(fam.profiles)}
    title, sub = _header(result)
    chars = (width - left * 2 - 22) // 7
    rows = sum(len(textwrap.wrap(t, chars)) for t in legend + [f"warning: {w_}" for w_ in result.warnings])
    total_h = top + height + 34 + 22 * rows + 16
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total_h}" '
           f'viewBox="0 0 {width} {total_h}" font-family="{FONT}" role="img">',
           f"<title>{escape(title)}</title>",
           '<style>.instance{stroke:#333;stroke-width:1.5}.free{fill:#f0f0f0;stroke:#bbb;'
           'stroke-dasharray:4 3}.label{font-weight:bold;fill:#1a1a1a}'
           '.small{font-size:12px;fill:#333}.head{font-size:17px;font-weight:bold;fill:#111}</style>',
           f'<path class="background" d="M0 0H{width}V{total_h}H0Z" fill="#ffffff"/>',
           f'<text class="head" x="{left}" y="30">{escape(title)}</text>',
           f'<text class="small" x="{left}" y="52">{escape(sub)}</text>',
           f'<text class="small" x="{left}" y="{top - 28}">{escape(fam.unit)}s</text>']
    for u in range(fam.units):
        out.append(f'<text class="small" x="{left + u * cell + cell // 2}" y="{top - 8}" '
                   f'text-anchor="middle">{u}</text>')
    for u in _free(result):
        x = left + u * cell
        out.append(f'<path class="free" d="M{x + 2} {top + 2}h{cell - 4}v{height - 4}h-{cell - 4}Z"/>')
    for key, inst in keys:
        x, w = left + inst.start * cell, inst.size * cell
        cx, fit = x + w // 2, min(14, int((w - 16) / (0.64 * len(inst.profile))))
        out += [f'<rect class="instance" x="{x + 2}" y="{top + 2}" width="{w - 4}" height="{height - 4}" '
                f'rx="6" fill="{colour[inst.profile]}"><title>{escape(f"{key}: {inst}")}</title></rect>',
                f'<text class="label" x="{cx}" y="{top + 32}" text-anchor="middle" font-size="14">{key}</text>',
                f'<text class="label" x="{cx}" y="{top + 54}" text-anchor="middle" font-size="{fit}">'
                f'{escape(inst.profile)}</text>',
                f'<text class="small" x="{cx}" y="{top + 74}" text-anchor="middle">'
                f'{escape(_span(inst, "slot"))}</text>']
    y = top + height + 34
    out.append(f'<text class="head" x="{left}" y="{y}">Legend</text>')
    for line in legend:
        key = line[0] if line[1:3] == "  " else None
        if key:
            fill = colour[dict(keys)[key].profile]
            out.append(f'<circle cx="{left + 7}" cy="{y + 22 - 5}" r="7" fill="{fill}" stroke="#333"/>')
        for part in textwrap.wrap(line, chars):
            y += 22
            out.append(f'<text class="small" x="{left + 22}" y="{y}">{escape(part)}</text>')
    for part in (p for w_ in result.warnings for p in textwrap.wrap("warning: " + w_, chars)):
        y += 22
        out.append(f'<text class="small" x="{left + 22}" y="{y}" fill="#a33">{escape(part)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
