"""A hub delivers every cluster: the fleet ApplicationSets generate, for every cluster, the very Applications its
per-cluster folder holds (GPU stack, NFD, DRA driver, NVIDIA's operator by Helm or OLM), each on the destination
its profile names; Flux's objects carry the profile's kubeconfig Secret; credentials are Secrets by name only.
Every object is checked against the upstream CRDs (../shared/refs/crds)."""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import pytest
import yaml
from hypothesis import given, settings as hsettings, strategies as st

from gpuop.kube.yamlio import load
from gpuop.verify import cel
from gpuop.verify.crdschema import CrdValidator

from conftest import CRDS, REPO, load_dir, run_gpuop
from test_operator import OCP, write_profile

ARN = "arn:aws:eks:us-east-1:111122223333:cluster/gpu-east"
HUB_PROFILES = {
    # a GPU stack with NFD and a DRA pool, on an API server, through a Flux hub, with repository credentials
    "hub-dra": """
        extends: dra.yaml
        metadata: {name: hub-dra, labels: {gpuop/rollout-wave: canary}}
        spec:
          delivery:
            destination: {server: "https://dra.gpu.example.com:6443", kubeConfigSecret: hub-dra-kubeconfig}
            credentials: {nfd: {flux: nfd-charts, argocd: nfd-charts-creds}, dra: {flux: dra-charts}}
        """,
    # NVIDIA's operator by Helm, on an EKS cluster Argo CD knows by its ARN
    "hub-operator": f"""
        extends: keep-operator.yaml
        metadata: {{name: hub-operator}}
        spec:
          delivery:
            destination: {{name: "{ARN}", kubeConfigSecret: hub-operator-kubeconfig}}
            credentials: {{operator: {{flux: nvidia-charts}}}}
        """,
}
SETTINGS_EXTRA = {"flux": {"secretRef": "gpu-clusters-git"}, "argocd": {"repositorySecret": "gpu-clusters-repo"}}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    w = tmp_path_factory.mktemp("hub")
    shutil.copytree(REPO / "profiles", w / "profiles")
    for name, body in HUB_PROFILES.items():
        (w / "profiles" / f"{name}.yaml").write_text(
            "apiVersion: gpuop/v1alpha1\nkind: ClusterProfile\n" + textwrap.dedent(body))
    write_profile(w / "profiles", "ocp-operator", OCP.replace(
        "delivery: {mode: operator,", "delivery: {destination: {name: ocp-east}, mode: operator,"))
    settings = yaml.safe_load((REPO / "gpuop.yaml").read_text())
    for k, v in SETTINGS_EXTRA.items():
        settings["gitops"].setdefault(k, {}).update(v)
    (w / "gpuop.yaml").write_text(yaml.safe_dump(settings))
    run_gpuop("synth", "profiles", "-o", "dist", cwd=w, check=True)
    dist = w / "dist"
    return dist, json.loads((dist / "index.json").read_text())


@pytest.fixture(scope="module")
def crds() -> CrdValidator:
    return CrdValidator.from_files(sorted(CRDS.glob("*.yaml")))


# ---- the ApplicationSet template as Argo CD renders it (goTemplate, missingkey=error) -------------------------

def _render(value, params: dict):
    """goTemplate over every string of the template: `{{.key}}` only (a parameter missing is an error, as with
    missingkey=error); any other action fails the test, so the templates cannot grow syntax this cannot check."""
    if isinstance(value, dict):
        return {k: _render(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, params) for v in value]
    if not isinstance(value, str):
        return value
    out = re.sub(r"\{\{\.(\w+)\}\}", lambda m: str(params[m.group(1)]), value)
    assert "{{" not in out, value
    return out


def _render_patch(patch: str, params: dict) -> dict:
    """templatePatch: the one form the fleet writes, `{{- if eq .key "v" }}A{{- else }}B{{- end }}`."""
    m = re.fullmatch(r'\{\{- if eq \.(\w+) "(\w+)" \}\}\n(.*?)\{\{- else \}\}\n(.*?)\{\{- end \}\}\n', patch, re.S)
    assert m, patch
    return load(m.group(3) if str(params[m.group(1)]) == m.group(2) else m.group(4))


def _merge(base: dict, patch: dict) -> dict:
    """Strategic merge of an Application patch: maps merge, lists replace (no patch strategy on those fields)."""
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def generated(appset: dict, params: dict) -> dict:
    spec = appset["spec"]
    app = _render(spec["template"], params)
    if "templatePatch" in spec:
        app = _merge(app, _render_patch(spec["templatePatch"], params))
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", **app}
    app["metadata"]["namespace"] = appset["metadata"]["namespace"]
    # Argo CD's Destination fields are omitempty: an empty name or server is unset
    app["spec"]["destination"] = {k: v for k, v in app["spec"]["destination"].items() if v != ""}
    return app


def hub_applications(dist, index) -> dict[str, tuple[dict, dict]]:
    """Application name -> (the Application a fleet ApplicationSet generates, that ApplicationSet)."""
    out = {}
    settings_path = "dist"
    for f in sorted((dist / "fleet" / "argocd").glob("applicationset*.yaml")):
        appset = load(f.read_text())
        (gen,) = appset["spec"]["generators"]
        pattern = gen["git"]["files"][0]["path"]
        assert pattern.startswith(f"{settings_path}/*/params/")
        for c in index["clusters"]:
            p = dist / c["name"] / "params" / pattern.rsplit("/", 1)[1]
            if p.is_file():
                app = generated(appset, json.loads(p.read_text()))
                assert app["metadata"]["name"] not in out, app["metadata"]["name"]
                out[app["metadata"]["name"]] = (app, appset)
    return out


def _target(c: dict) -> dict:
    return c.get("destination") or {"name": c["name"]}


def test_the_hub_generates_every_application_of_every_cluster(hub, crds):
    """Every Application of every cluster's argocd/ folder (GPU stack, NFD, DRA, NVIDIA's operator by Helm and by
    OLM) is generated by a fleet ApplicationSet, the same in all but project and destination; none is left out."""
    dist, index = hub
    apps = hub_applications(dist, index)
    seen = set()
    for c in index["clusters"]:
        for local in load_dir(dist / c["argocd"]):
            if local["kind"] != "Application":
                continue
            name = local["metadata"]["name"]
            assert name in apps, f"{name} ({c['name']}) is delivered by no fleet ApplicationSet"
            app, appset = apps[name]
            assert crds.errors(app) == [] and cel.errors(app) == [], (name, crds.errors(app))
            seen.add(name)
            hs, ls = app["spec"], local["spec"]
            assert hs["destination"] == {**_target(c), "namespace": ls["destination"]["namespace"]}, name
            src, lsrc = dict(hs["source"]), dict(ls["source"])
            if "values" in src.get("helm", {}):          # an upstream chart's values: one JSON text on the hub
                lhelm = dict(lsrc["helm"])
                assert json.loads(src["helm"]["values"]) == lhelm.pop("valuesObject"), name
                src["helm"] = {k: v for k, v in src["helm"].items() if k != "values"}
                lsrc["helm"] = lhelm
            assert src == lsrc, name
            if appset["metadata"]["name"] == "gpuop-fleet":
                # the GPU stacks' one template: retries sized for any cluster's driver roll, and the dry run skipped
                # for custom kinds any stack may hold
                assert set(ls["syncPolicy"]["syncOptions"]) <= set(hs["syncPolicy"]["syncOptions"]), name
                assert hs["ignoreDifferences"] == ls["ignoreDifferences"], name
            else:
                for key in ("syncPolicy", "ignoreDifferences"):
                    assert hs.get(key) == ls.get(key), (name, key)
            expected_project = "gpuop-nfd" if name.endswith("-nfd") else ls["project"]
            assert hs["project"] == expected_project == appset["spec"]["template"]["spec"]["project"], name
            assert app["metadata"]["labels"]["gpuop/cluster"] == c["name"]
    kinds = {k for c in index["clusters"] for k in c["hub"]}
    assert {"cluster", "nfd", "dra", "operator", "operator-olm"} <= kinds
    assert seen == set(apps), set(apps) - seen


def test_destinations_come_from_the_profile(hub):
    dist, index = hub
    by = {c["name"]: c for c in index["clusters"]}
    assert by["hub-dra"]["destination"] == {"server": "https://dra.gpu.example.com:6443"}
    assert by["hub-operator"]["destination"] == {"name": ARN}
    assert by["ocp-operator"]["destination"] == {"name": "ocp-east"}
    for name, target in (("hub-dra", {"server": "https://dra.gpu.example.com:6443"}), ("hub-operator", {"name": ARN}),
                         ("ocp-operator", {"name": "ocp-east"})):
        apps = [a for a in load_dir(dist / name / "argocd") if a["kind"] == "Application"]
        assert apps and all({k: v for k, v in a["spec"]["destination"].items() if k != "namespace"} == target
                            for a in apps), name
        projects = [a for a in load_dir(dist / name / "argocd") if a["kind"] == "AppProject"]
        assert all(d == {**target, "namespace": d["namespace"]} for p in projects for d in p["spec"]["destinations"])
    # a profile without a destination keeps the settings' server per cluster and its gpuop name on the hub
    app = load((dist / "prod-east" / "argocd" / "application.yaml").read_text())
    assert app["spec"]["destination"]["server"] == "https://kubernetes.default.svc"
    assert json.loads((dist / "prod-east" / "params" / "cluster.json").read_text())["destinationName"] == "prod-east"


def test_fleet_projects_allow_each_hub_application_and_nothing_else(hub, crds):
    dist, index = hub
    projects = {p["metadata"]["name"]: p for f in ("appproject.yaml", "nfd-appproject.yaml")
                for p in [load((dist / "fleet" / "argocd" / f).read_text())]}
    for p in projects.values():
        assert crds.errors(p) == [], crds.errors(p)
    for name, (app, appset) in hub_applications(dist, index).items():
        assert crds.errors(appset) == [], crds.errors(appset)
        project = projects.get(app["spec"]["project"])
        if project is None:          # the settings' project (operator, DRA): the user's own, as per cluster
            continue
        assert app["spec"]["destination"] in project["spec"]["destinations"], name
        assert app["spec"]["source"]["repoURL"] in project["spec"]["sourceRepos"], name
    nfd_dest = projects["gpuop-nfd"]["spec"]["destinations"]
    assert {"server": "https://dra.gpu.example.com:6443", "namespace": "node-feature-discovery"} in nfd_dest
    assert not [d for d in nfd_dest if d.get("name") in ("keep-operator", "hub-operator", "ocp-operator")]


def test_flux_delivers_to_the_profiles_cluster_with_sources_of_its_own(hub, crds):
    dist, index = hub
    for name, secret in (("hub-dra", "hub-dra-kubeconfig"), ("hub-operator", "hub-operator-kubeconfig")):
        c = next(c for c in index["clusters"] if c["name"] == name)
        objs = load_dir(dist / c["flux"]) + (load_dir(dist / c["fluxOverlay"]) if "fluxOverlay" in c else [])
        for o in objs:
            assert crds.errors(o) == [] and cel.errors(o) == [], (name, o["kind"], crds.errors(o))
        remote = [o for o in objs if o["kind"] == "HelmRelease"
                  or o["kind"] == "Kustomization" and not o["metadata"]["name"].endswith("-nfd")]
        assert remote and all(o["spec"]["kubeConfig"] == {"secretRef": {"name": secret}} for o in remote), name
        # on the remote cluster a release is stored in its own namespace (Flux's need not exist there)
        assert all(o["spec"]["storageNamespace"] == o["spec"]["targetNamespace"]
                   for o in objs if o["kind"] == "HelmRelease")
        repos = [o for o in objs if o["kind"] == "HelmRepository"]
        assert repos and all(r["metadata"]["name"].startswith(f"gpuop-{name}-") for r in repos), name
    # the NFD Kustomization of flux-overlay applies Flux objects: on the hub itself
    nfd_ks = load((dist / "hub-dra" / "flux-overlay" / "nfd-kustomization.yaml").read_text())
    assert "kubeConfig" not in nfd_ks["spec"]
    # a profile without kubeConfigSecret: Flux's own cluster, the shared source names as before
    hr = load((dist / "prod-east" / "flux" / "helmrelease.yaml").read_text())
    assert "kubeConfig" not in hr["spec"] and hr["spec"]["storageNamespace"] == "flux-system"


def test_credentials_are_secret_references_in_both_engines(hub):
    dist, index = hub
    by = {c["name"]: c for c in index["clusters"]}
    repos = {o["metadata"]["name"]: o for o in load_dir(dist / "hub-dra" / "flux") if o["kind"] == "HelmRepository"}
    assert repos["gpuop-hub-dra-node-feature-discovery"]["spec"]["secretRef"] == {"name": "nfd-charts"}
    assert repos["gpuop-hub-dra-dra-driver-nvidia-gpu"]["spec"]["secretRef"] == {"name": "dra-charts"}
    (nvidia,) = [o for o in load_dir(dist / "hub-operator" / "flux") if o["kind"] == "HelmRepository"]
    assert nvidia["spec"]["secretRef"] == {"name": "nvidia-charts"}
    for c in index["clusters"]:
        for folder in ("flux", "fluxOverlay"):
            for o in load_dir(dist / c[folder]) if folder in c else []:
                if o["kind"] == "GitRepository":
                    assert o["spec"]["secretRef"] == {"name": "gpu-clusters-git"}
    # Argo CD finds credentials by URL: the Secrets the hub must hold are listed, never written
    assert by["hub-dra"]["credentials"] == {"nfd": {"flux": "nfd-charts", "argocd": "nfd-charts-creds"},
                                            "dra": {"flux": "dra-charts"}}
    assert not [p for p in dist.rglob("*.yaml") if re.search(r"(?m)^kind: Secret$", p.read_text())]


def test_oci_source_takes_the_settings_secret(workdir, tmp_path, crds):
    w = tmp_path / "w"
    (w / "profiles").mkdir(parents=True)
    shutil.copy(REPO / "profiles" / "prod-east.yaml", w / "profiles")
    shutil.copy(REPO / "profiles" / "_base.yaml", w / "profiles")
    settings = yaml.safe_load((REPO / "gpuop.yaml").read_text())
    settings["gitops"]["flux"] = {"source": "oci", "oci": "oci://registry.example.com/gpu", "secretRef": "ghcr-pull"}
    (w / "gpuop.yaml").write_text(yaml.safe_dump(settings))
    run_gpuop("synth", "-o", "out", cwd=w, check=True)
    oci = load((w / "out" / "prod-east" / "flux" / "ocirepository.yaml").read_text())
    assert oci["spec"]["secretRef"] == {"name": "ghcr-pull"} and crds.errors(oci) == []


# ---- no secret value can reach dist/ ---------------------------------------------------------------------------

REFERENCE_FIELDS = ("destination.kubeConfigSecret", "credentials.nfd.flux", "credentials.nfd.argocd",
                    "credentials.operator.flux", "credentials.dra.argocd", "settings.flux.secretRef",
                    "settings.argocd.repositorySecret")


def _accepts(field: str, value: str) -> bool:
    from pydantic import ValidationError

    from gpuop.profile.models import Delivery
    from gpuop.profile.settings import GitOps

    head, *path = field.split(".")
    doc: dict = {}
    node = doc
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    try:
        if head == "settings":
            GitOps.model_validate({"repoURL": "https://git.example.com/gpu.git", **doc})
        else:
            Delivery.model_validate({head: doc})
    except ValidationError:
        return False
    return True


@pytest.mark.fast
@hsettings(max_examples=150, deadline=None)
@given(value=st.text(min_size=1, max_size=80), field=st.sampled_from(REFERENCE_FIELDS))
def test_a_reference_field_takes_a_secret_name_never_a_value(value, field):
    """Whatever is written where a Secret is referenced, gpuop accepts only a Kubernetes object name: a password,
    a token, a key or a kubeconfig is refused before anything is compiled."""
    from gpuop.kube.types import is_dns_subdomain

    assert _accepts(field, value) == is_dns_subdomain(value), (field, value)


@pytest.mark.fast
@pytest.mark.parametrize("value", ["ghp_0123456789abcdefABCDEF", "-----BEGIN OPENSSH PRIVATE KEY-----",
                                   "user:hunter2", "apiVersion: v1\nkind: Config", "c2VjcmV0"])
def test_secret_shaped_values_are_refused_in_every_reference_field(value):
    assert not any(_accepts(f, value) for f in REFERENCE_FIELDS)


def test_credentials_in_a_destination_url_are_refused_and_never_echoed(tmp_path):
    (tmp_path / "profiles").mkdir()
    shutil.copy(REPO / "gpuop.yaml", tmp_path / "gpuop.yaml")
    (tmp_path / "profiles" / "c.yaml").write_text(textwrap.dedent("""\
        apiVersion: gpuop/v1alpha1
        kind: ClusterProfile
        metadata: {name: c}
        spec:
          platform: {type: kubernetes, version: "1.33"}
          os: ubuntu24.04
          delivery: {destination: {server: "https://admin:S3cr3tT0ken@api.example.com:6443"}}
          nodePools: [{name: a, gpu: L4, nodes: 1}]
        """))
    proc = run_gpuop("synth", "profiles", "-o", "dist", cwd=tmp_path)
    assert proc.returncode == 2 and "S3cr3tT0ken" not in proc.stderr and "***@" in proc.stderr
    assert "spec.delivery.destination.server" in proc.stderr and not (tmp_path / "dist").exists()


def test_no_credential_field_is_in_the_hub_output(hub):
    dist, _ = hub
    for p in dist.rglob("*"):
        if p.is_file() and p.suffix in (".yaml", ".json"):
            text = p.read_text()
            assert not re.search(r"(?m)^\s*(password|username|sshPrivateKey|bearerToken|stringData|"
                                 r"githubAppPrivateKey|value\.yaml)\s*:", text), p


def test_the_report_names_each_destination_and_the_secrets_the_hub_must_hold(hub):
    dist, _ = hub
    run_gpuop("report", cwd=dist.parent, check=True)
    html = (dist.parent / "report" / "index.html").read_text()
    assert ('<p id="secrets">Secrets the engines need for this repository (by name; gpuop writes none): '
            "Argo CD repository Secret gpu-clusters-repo; Flux source secretRef gpu-clusters-git</p>") in html
    section = html[html.index('id="c-hub-dra"'):html.index('id="c-hub-operator"')]
    assert ('<p class="hub">delivered to: Argo CD server https://dra.gpu.example.com:6443; Flux kubeconfig Secret '
            "hub-dra-kubeconfig; dra chart credentials: flux Secret dra-charts; nfd chart credentials: argocd Secret "
            "nfd-charts-creds, flux Secret nfd-charts</p>") in section
    assert 'delivery <span class="delivery">operator v26.7.0 (helm)</span>' in \
        html[html.index('id="c-hub-operator"'):]
