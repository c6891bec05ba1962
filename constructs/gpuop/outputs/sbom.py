"""Writer: a CycloneDX bill of materials of what a cluster deploys (dist/<cluster>/sbom.cdx.json), and one of the
fleet (dist/fleet/sbom.cdx.json), built with cyclonedx-python-lib.

A cluster's BOM lists every image its outputs pull (exactly the refs of images.txt in stack mode; in operator
mode the images NVIDIA's chart values name and those of the companion chart's objects) and every chart it deploys
(gpuop's own chart of the cluster -- in operator mode its companion chart `<cluster>-gpuop-addons` --, NFD's, the DRA
driver's, NVIDIA's operator chart), each with its version, its digest where the image is pinned by the
digest lock (`spec.images.digestLock`: the sha256 hash and a pkg:oci purl) and its licences from
catalog/data/licences.yaml, with the licence's conditions as properties (entitlement, licensing server, mirroring).
The fleet's BOM lists each cluster's chart with a BOM-Link to the cluster's BOM.

Deterministic: no timestamp, and a serial number derived from the BOM's content (uuid5), so the same inputs give
the same bytes and a change of content gives a new serial number.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid

from gpuop import __version__
from gpuop.catalog import licences as licence_catalog
from gpuop.outputs import images
from gpuop.outputs.target import OPERATOR, Target, Written
from gpuop.outputs.version import VERSION_PLACEHOLDER

PATH = "sbom.cdx.json"                      # dist/<cluster>/sbom.cdx.json, dist/fleet/sbom.cdx.json
FLEET = f"fleet/{PATH}"
_NS = uuid.UUID("6f1c0a52-3b1e-5d0a-9e43-7a5c0f3d9b21")   # gpuop's namespace for serial numbers (a fixed uuid)
_REF = re.compile(r"^(?P<repo>[^@]+?)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[a-f0-9]{64}))?$")


def split_ref(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference (a registry port's ':' is part of the repository)."""
    m = _REF.match(ref)
    if m is None or "/" in (m.group("tag") or ""):
        return ref, None, None
    return m.group("repo"), m.group("tag"), m.group("digest")


def _licences(ids: tuple[str, ...], table):
    from cyclonedx.model.license import DisjunctiveLicense, LicenseExpression

    if any(" " in lid for lid in ids):    # an SPDX expression ("MIT OR GPL-2.0-only"): CycloneDX takes one expression
        return [LicenseExpression(" AND ".join(f"({lid})" if " " in lid else lid for lid in ids))]   # or a list, not both
    out = []
    for lid in ids:
        if lid.startswith("LicenseRef-"):
            known = table.licences.get(lid)
            out.append(DisjunctiveLicense(name=known.name if known else lid, url=known.url if known and known.url
                                          else None))
        else:
            out.append(DisjunctiveLicense(id=lid))
    return out


def _props(pairs):
    from cyclonedx.model import Property

    return [Property(name=f"gpuop:{k}", value=str(v)) for k, v in pairs if v is not None]


def _image_component(ref: str, registries: tuple[str, ...], flavours: tuple[str, ...], table):
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    repo, tag, digest = split_ref(ref)
    found = table.image(repo, registries)
    path, art = found if found else (None, None)
    reg = table.registry(repo)
    pairs = [("image", ref), ("registry", reg.kind if reg else "private")]
    ids: tuple[str, ...] = art.licences if art else ()
    if art is not None and art.driver:          # the driver image: the licences of the flavours it installs
        for f in flavours:
            fl = table.drivers[f]
            ids += tuple(i for i in fl.licences if i not in ids)
            pairs += [(f"driver:{f}:entitlement", str(fl.entitlement).lower()),
                      (f"driver:{f}:licensingServer", str(fl.licensingServer).lower()),
                      (f"driver:{f}:mirror", "private-only" if fl.privateOnly else str(fl.mirror).lower())]
    if art is not None:
        pairs += [("licence:source", art.source), ("sourceLicence", art.sourceLicence)]
    else:
        pairs.append(("licence", "unknown: not in catalog/data/licences.yaml"))
    if reg is not None and reg.kind == "entitled":
        pairs.append(("entitlement", reg.entitlement))
    name = repo.rsplit("/", 1)[-1]
    purl = None
    if digest:                                   # an OCI purl names the image by its digest
        purl = PackageURL(type="oci", name=name, version=digest, qualifiers={"repository_url": repo, "tag": tag or ""})
    return Component(type=ComponentType.CONTAINER, name=repo, version=tag or digest, bom_ref=f"image:{ref}",
                     purl=purl, licenses=_licences(ids, table),
                     hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest.split(":", 1)[1])] if digest else None,
                     description=art.title if art else None, properties=_props(pairs))


def _chart_component(name: str, version: str, repository: str, table, own: bool = False):
    from cyclonedx.model import ExternalReference, ExternalReferenceType, XsUri
    from cyclonedx.model.component import Component, ComponentType

    art = table.charts.get(name)
    pairs = [("chart:repository", repository)]
    if own:
        pairs.append(("licence", "compiled by gpuop from your profile: yours"))
    elif art is not None:
        pairs.append(("licence:source", art.source))
    refs = [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(repository))] if "://" in repository \
        else None
    return Component(type=ComponentType.APPLICATION, name=name, version=version, bom_ref=f"chart:{name}@{version}",
                     description=art.title if art and not own else "Helm chart compiled by gpuop", licenses=_licences(art.licences, table) if art else None,
                     external_references=refs, properties=_props(pairs + [("kind", "helm-chart")]))


def _serialize(subject, components: list, extra_props=()) -> str:
    """The BOM as JSON (CycloneDX 1.6), its serial number derived from its content."""
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.tool import ToolRepository
    from cyclonedx.output.json import JsonV1Dot6

    def build(serial):
        tools = ToolRepository(components=[Component(type=ComponentType.APPLICATION, name="gpuop",
                                                     version=__version__)])
        bom = Bom(serial_number=serial, metadata=BomMetaData(component=subject, tools=tools,
                                                             properties=_props(extra_props)),
                  components=components)
        bom.metadata.timestamp = None          # same inputs, same bytes: no time in the output
        bom.register_dependency(subject, components)   # the subject deploys each of them (a complete graph)
        return json.loads(JsonV1Dot6(bom).output_as_string())

    body = build(uuid.UUID(int=0))
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    body = build(uuid.uuid5(_NS, digest))
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def cluster_bom(name: str, chart_version: str, refs: list[str], charts: list[tuple[str, str, str, bool]],
                registries: tuple[str, ...], flavours: tuple[str, ...]) -> str:
    """A cluster's BOM. `refs`: every image it pulls; `charts`: (name, version, repository, compiled by gpuop) of
    the charts it deploys; `registries`: where the release's images live (the release's
    registry, the mirror) so an image is known by its path; `flavours`: the driver flavours it installs."""
    from cyclonedx.model.component import Component, ComponentType

    table = licence_catalog.load()
    comps = [_image_component(r, registries, flavours, table) for r in sorted(set(refs))]
    comps += [_chart_component(n, v, repo, table, own=own) for n, v, repo, own in charts]
    subject = Component(type=ComponentType.PLATFORM, name=name, version=chart_version, bom_ref=f"cluster:{name}",
                        description="GPU stack of the cluster, compiled by gpuop")
    return _serialize(subject, comps, [("driverFlavours", ",".join(flavours) or None)])


def serial_of(text: str) -> str:
    return json.loads(text)["serialNumber"]


def fleet_bom(index: list[dict]) -> str:
    """The fleet's BOM: each cluster's chart (or operator delivery) with a BOM-Link to the cluster's own BOM."""
    from cyclonedx.model import ExternalReference, ExternalReferenceType, XsUri
    from cyclonedx.model.component import Component, ComponentType

    comps = []
    for e in sorted(index, key=lambda e: e["name"]):
        sb = e.get("sbom")
        if not sb:
            continue
        link = f"{sb['serialNumber']}/1"              # BOM-Link: urn:cdx:<serial>/<version>
        comps.append(Component(type=ComponentType.PLATFORM, name=e["name"], version=e.get("chartVersion"),
                               bom_ref=f"cluster:{e['name']}",
                               external_references=[ExternalReference(type=ExternalReferenceType.BOM,
                                                                      url=XsUri(link.replace("urn:uuid:", "urn:cdx:")))],
                               properties=_props([("sbom", sb["path"])])))
    subject = Component(type=ComponentType.PLATFORM, name="fleet", bom_ref="fleet",
                        description="Every GPU cluster compiled by gpuop")
    return _serialize(subject, comps)


def _operator_refs(values: dict) -> list[str]:
    """The images NVIDIA's chart values name (repository/image:version of every enabled section): what the operator
    pulls, with the tags as the values give them (the operator appends the node's OS to the driver's)."""
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if all(isinstance(node.get(k), str) and node.get(k) for k in ("repository", "image", "version")) \
                    and node.get("enabled", True) is not False:
                refs.append(f"{node['repository']}/{node['image']}:{node['version']}")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(values)
    return refs


def write(t: Target) -> Written:
    """Writer (outputs/target.py): dist/<cluster>/sbom.cdx.json and the index entry's `sbom`. The images are those
    the images writer lists (images.txt), computed from the same target."""
    listed = images.write(t).files
    mine = files(t.plan, listed, t.name, t.repo_path(t.folders.chart), VERSION_PLACEHOLDER,
                 _companion(t) if t.folders.delivery == OPERATOR else None)
    return Written(mine, index_entry(mine, t.name))


def _companion(t: Target) -> tuple[str, list[str]] | None:
    """Operator mode's companion chart (outputs/addons.py) as the BOM lists it: (its path in the repository, the
    images of its objects -- the health gate's checks); None when the cluster has no companion objects."""
    from gpuop.outputs import addons
    from gpuop.outputs.manifests import rendered

    stack = addons.companion(t.stack)
    if stack is None:
        return None
    return t.repo_path(f"{t.folders.addons}/chart"), images.image_refs(rendered(stack))


def files(plan, files: dict, c: str, chart_path: str, chart_version: str,
          companion: tuple[str, list[str]] | None = None) -> dict[str, str]:
    """dist/<cluster>/sbom.cdx.json: the images of the cluster's images.txt (operator mode: of NVIDIA's chart values
    and of the companion chart's objects) and the charts it deploys (operator mode: the companion chart too, whose
    version is the cluster's)."""
    listing = files.get(f"{c}/images.txt")
    charts: list[tuple[str, str, str, bool]] = []
    if plan.operator is None:
        refs = listing.split() if listing else []
        charts.append((c, chart_version, chart_path, True))
    else:
        crs = [d["spec"] for d in plan.operator.drivers]           # NVIDIADriver CRs: one driver each
        refs = sorted(set(_operator_refs(plan.operator.values)) | set(_operator_refs({"crs": crs}))
                      | set(listing.split() if listing else []))
        if plan.operator.install == "helm":
            charts.append((plan.operator.chart, plan.operator.version, plan.operator.chart_repository, False))
        if companion is not None:
            from gpuop.outputs.addons import chart_name

            path, own_refs = companion
            refs = sorted(set(refs) | set(own_refs))
            charts.append((chart_name(c), chart_version, path, True))
    if plan.nfd.mode == "deploy" and plan.nfd.chart:
        charts.append((plan.nfd.chart, plan.nfd.version, plan.nfd.repository, False))
    if plan.dra is not None:
        charts.append((plan.dra.chart, plan.dra.chart_version, plan.dra.repository, False))
    registries = tuple(r for r in (json.loads(plan.values_json).get("imageRegistry"), plan.nfd.image_registry) if r)
    return {f"{c}/{PATH}": cluster_bom(c, chart_version, refs, charts, registries, plan.driver_flavours)}


def index_entry(files: dict, c: str) -> dict:
    """The cluster's BOM in index.json: its path and serial number (the fleet's BOM links it by them)."""
    return {"sbom": {"path": f"{c}/{PATH}", "serialNumber": serial_of(files[f"{c}/{PATH}"])}}
