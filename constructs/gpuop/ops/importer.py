"""`gpuop import FILE... [-o OUT]`: what a cluster runs today -> a profile in `delivery.mode: operator`.

Input (any mix, multi-document YAML allowed): a values.yaml of NVIDIA's gpu-operator chart, or a ClusterPolicy
with its NVIDIADriver CRs and the ConfigMaps they reference (device-plugin config, mig-parted config, DCGM
metrics). A ClusterPolicy is first turned into the chart's value shape (useNvidiaDriverCRD ->
driver.nvidiaDriverCRD.enabled, upgradePolicy.podDeletion -> gpuPodDeletion), then every leaf is either
- mapped to a profile field (the tables below), or
- equal to NVIDIA's chart default (`--chart-defaults FILE`: the chart's values.yaml, e.g. from `helm show
  values nvidia/gpu-operator --version v26.7.0`; gpuop does not ship a copy of NVIDIA's file): nothing to
  say, since gpuop's operator output leaves that key at the chart's default too; without the file every
  unmapped setting is reported, or
- reported: a `# gpuop import:` comment in the profile at the section it belongs to, naming the setting and its
  value, because gpuop cannot express it. The profile still compiles; the setting is lost until someone acts.

Node pools come from the NVIDIADriver CRs (one pool per non-default CR: its nodeSelector and driver version),
the mig-parted config (one pool per named MIG config: layout from `mig-devices`, GPU model from the PCI ids of
`device-filter`) and the device-plugin config (one pool per sharing config). Facts the operator's input does
not hold -- the GPU model of a pool without a mig-parted entry, the platform version, the node OS -- get the
placeholder named in the comment beside them.

Normalizations (the round trip profile -> operator output differs from the original only here, by design):
- the names of the ConfigMaps gpuop writes (`device-plugin-config`, `custom-mig-parted-config`,
  `dcgm-exporter-metrics`), the plugin config's default key (`default`) and the MIG/plugin config names
  inside them (derived from the content, plan/pools.py), and their content (gpuop regenerates it);
- `hostPaths.kubeletRootDir` written as its CRD default (/var/lib/kubelet);
- `validator.version` and `nodeStatusExporter.version` pinned to the release's (the chart renders its
  appVersion there, `main-latest` in the chart source of the reference data);
- component versions equal to the stack release's are left to the release (same value).
Exit codes: 0 with a profile, 2 only when an input cannot be read (missing, not YAML, not a mapping).
"""

from __future__ import annotations

import copy
import io
import re
from pathlib import Path

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gpuop import catalog as catalog_mod
from gpuop.errors import Issue, UserError
from gpuop.kube.yamlio import quote_ambiguous

NOTE = "gpuop import:"
COMPONENTS = {      # chart values key -> (profile key, catalog component)
    "toolkit": ("toolkit", "toolkit"), "devicePlugin": ("devicePlugin", "devicePlugin"), "dcgm": ("dcgm", "dcgm"),
    "dcgmExporter": ("dcgmExporter", "dcgmExporter"), "gfd": ("gfd", "gfd"),
    "nodeStatusExporter": ("nodeStatusExporter", "nodeStatusExporter"), "migManager": ("migManager", "migManager"),
    "validator": ("validator", "validator"), "driver": ("driver", "driver"),
}
UPSTREAM_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
PLACEHOLDER_GPU = "L40S"
NORMALIZED = (      # values paths whose difference is a documented normalization (module docstring)
    "devicePlugin.config.name", "devicePlugin.config.default", "devicePlugin.config.data",
    "devicePlugin.config.create", "migManager.config.name", "migManager.config.data", "migManager.config.create",
    "dcgmExporter.config.name", "dcgmExporter.config.data", "dcgmExporter.config.create",
    "hostPaths.kubeletRootDir", "validator.version", "nodeStatusExporter.version",
)


# ------------------------------------------------------------------------------------------ reading

def read_inputs(paths: list[Path]) -> list[tuple[str, dict]]:
    """(file, document) of every YAML mapping in the files; unreadable input is a located UserError."""
    docs, issues = [], []
    for path in paths:
        shown = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            issues.append(Issue(shown, 0, 0, "", f"cannot read: {getattr(exc, 'strerror', None) or exc}"))
            continue
        try:
            found = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            issues.append(Issue(shown, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0, "",
                                f"not valid YAML: {getattr(exc, 'problem', None) or exc}"))
            continue
        bad = [d for d in found if not isinstance(d, dict)]
        if not found or bad:
            issues.append(Issue(shown, 0, 0, "", "expected operator chart values or Kubernetes objects (YAML mappings)"))
            continue
        docs += [(shown, d) for d in found]
    if issues:
        raise UserError(issues)
    return docs


def values_from_policy(spec: dict) -> dict:
    """A ClusterPolicy spec in the chart's value shape (the inverse of templates/clusterpolicy.yaml's renames)."""
    v = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    d = v.setdefault("driver", {})
    if not isinstance(d, dict):
        return v
    if "useNvidiaDriverCRD" in d:
        d.setdefault("nvidiaDriverCRD", {})["enabled"] = d.pop("useNvidiaDriverCRD")
    up = d.get("upgradePolicy")
    if isinstance(up, dict) and "podDeletion" in up:
        up["gpuPodDeletion"] = up.pop("podDeletion")
    return v


def leaves(node, path: tuple = ()):
    """(key path, value) of every leaf; paths are tuples because label keys contain dots."""
    if isinstance(node, dict) and node:
        for k, val in node.items():
            yield from leaves(val, path + (str(k),))
    else:
        yield path, node


def get_t(node, path: tuple, default=None):
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def get(node, path: str, default=None):
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


# ------------------------------------------------------------------------------------------ the mapping

class Importer:
    def __init__(self, values: dict, drivers: list[dict], configmaps: dict[str, dict], policy: bool, cat,
                 defaults: dict | None = None):
        self.v = values
        self.drivers = drivers
        self.cms = configmaps
        self.policy = policy
        self.cat = cat
        self.release = cat.release(None)
        self.defaults = defaults if defaults is not None else {}
        self.defaults_known = defaults is not None
        self.used: set[str] = set()
        self.notes: dict[str, list[str]] = {}       # profile section -> comments
        self.unexpressed: list[str] = []            # values paths reported as not expressible

    def take(self, path: str, default=None):
        self.used.add(path)
        return get(self.v, path, default)

    def note(self, section: str, text: str) -> None:
        self.notes.setdefault(section, []).append(text)

    # ---- pieces

    def registry(self) -> str | None:
        repo = self.take("driver.repository")
        return repo if isinstance(repo, str) and repo else None

    def component(self, key: str, spec: CommentedMap, registry: str | None) -> None:
        prof_key, cat_key = COMPONENTS[key]
        section = spec.get(prof_key) or CommentedMap()
        enabled = self.take(f"{key}.enabled")
        if enabled is not None and key != "validator":
            section["enabled"] = bool(enabled)
        ref = self.release.components.get(cat_key)
        version = self.take(f"{key}.version")
        if ref is not None and version not in (None, "") and key != "driver":
            if str(version) != ref.version and version != "main-latest":   # the chart source's appVersion
                section["version"] = str(version)
        repo, image = self.take(f"{key}.repository"), self.take(f"{key}.image")
        if ref is not None and registry and repo and image:
            head, _, name = ref.image.rpartition("/")
            want = f"{registry}/{head}" if head else registry
            if (repo, image) != (want, name):
                self.note(prof_key, f"{key}.repository/image {repo}/{image} is not the release's image under the "
                          f"registry {registry} ({want}/{name}); gpuop uses the latter")
                self.unexpressed += [f"{key}.repository", f"{key}.image"]
        res = self.take(f"{key}.resources")
        if res:
            section["resources"] = res
        self.take(f"{key}.imagePullPolicy")
        self.take(f"{key}.imagePullSecrets")
        if section:
            spec[prof_key] = section

    def driver(self, spec: CommentedMap, delivery_op: CommentedMap) -> None:
        d = spec.setdefault("driver", CommentedMap())
        version = self.take("driver.version")
        precompiled = self.take("driver.usePrecompiled")
        if isinstance(version, str) and version.startswith("sha256:"):
            delivery_op["driverDigest"] = version
        elif version is not None and re.match(r"^\d{3}(\.\d+){0,2}$", str(version)) and self.cat.branch(str(version)):
            d["version"] = str(version)
        elif version is not None:
            self.note("driver", f"driver.version {version!r} is not a driver version of gpuop's catalog; the "
                      "release default is used")
            self.unexpressed.append("driver.version")
        if precompiled:
            self.note("driver", "driver.usePrecompiled: true needs spec.driver.precompiled with the nodes' kernels "
                      "(spec.driver.kernels), which the operator's input does not list; add both")
            self.unexpressed.append("driver.usePrecompiled")
        kmt = self.take("driver.kernelModuleType")
        if kmt in ("open", "proprietary"):
            d["kernelModuleType"] = kmt
        crd = self.take("driver.nvidiaDriverCRD.enabled")
        self.take("driver.nvidiaDriverCRD.deployDefaultCR")
        if crd:
            delivery_op["nvidiaDriverCRD"] = True
        up = CommentedMap()
        pol = "driver.upgradePolicy"
        auto = self.take(f"{pol}.autoUpgrade")
        if auto is False:
            up["autoUpgrade"] = False
        mpu = self.take(f"{pol}.maxParallelUpgrades")
        if mpu is not None and mpu != 1:
            up["maxParallelUpgrades"] = mpu
        if self.take(f"{pol}.drain.enable"):
            up["drain"] = True
        forces = {self.take(f"{pol}.drain.force", False), self.take(f"{pol}.gpuPodDeletion.force", False)}
        timeouts = {self.take(f"{pol}.drain.timeoutSeconds", 0), self.take(f"{pol}.gpuPodDeletion.timeoutSeconds", 0)}
        empties = {self.take(f"{pol}.drain.deleteEmptyDir", False),
                   self.take(f"{pol}.gpuPodDeletion.deleteEmptyDir", False)}
        for name, vals, default in (("force", forces, False), ("timeoutSeconds", timeouts, 0),
                                    ("deleteEmptyDir", empties, False)):
            if len(vals) > 1:
                chosen = max(vals)
                self.note("driver", f"upgradePolicy drain.{name} and gpuPodDeletion.{name} differ; gpuop has one "
                          f"{name} for both: {chosen}")
                self.unexpressed += [f"{pol}.drain.{name}", f"{pol}.gpuPodDeletion.{name}"]
                vals = {chosen}
            val = vals.pop()
            if val != default:
                up[name] = val
        sel = self.take(f"{pol}.drain.podSelector")
        if sel:
            up["podSelector"] = sel
        if up:
            d["upgradePolicy"] = up
        enabled = self.take("driver.enabled")
        if enabled is False:
            d["enabled"] = False

    def dcgm_exporter(self, spec: CommentedMap) -> None:
        ex = spec.setdefault("dcgmExporter", CommentedMap())
        sm = CommentedMap()
        sm_enabled = self.take("dcgmExporter.serviceMonitor.enabled")
        if sm_enabled is not None:
            sm["enabled"] = bool(sm_enabled)
        for k, default in (("interval", "15s"), ("honorLabels", False), ("additionalLabels", {})):
            val = self.take(f"dcgmExporter.serviceMonitor.{k}")
            if val is not None and val != default:
                sm[k] = val
        if sm:
            ex["serviceMonitor"] = sm
        for src, dst in (("enablePodLabels", "podLabels"), ("enablePodUID", "podUID")):
            if self.take(f"dcgmExporter.{src}"):
                ex[dst] = True
        allow = self.take("dcgmExporter.podLabelAllowlistRegex")
        if allow:
            ex["podLabelAllowlist"] = list(allow)
        csv = self.config_data("dcgmExporter", "dcgm-metrics.csv")
        if isinstance(csv, str):
            metrics = CommentedSeq()
            for line in csv.splitlines():
                parts = [p.strip() for p in line.split(",", 2)]
                if len(parts) == 3 and not line.lstrip().startswith("#"):
                    metrics.append(CommentedMap(field=parts[0], type=parts[1], help=parts[2]))
            if metrics:
                ex["metrics"] = metrics
        if not ex:
            del spec["dcgmExporter"]

    def config_data(self, key: str, item: str | None = None):
        """A component's config content: inline chart values (`config.data`) or the referenced ConfigMap."""
        name = self.take(f"{key}.config.name")
        self.take(f"{key}.config.create")
        self.take(f"{key}.config.default")
        data = self.take(f"{key}.config.data")
        if data in (None, {}, "") and name and name in self.cms:
            data = self.cms[name].get("data") or {}
        if item is None or isinstance(data, str):
            return data
        return (data or {}).get(item)

    # ---- pools

    def gpu_of(self, filters) -> str | None:
        ids = {f.upper() for f in (filters if isinstance(filters, list) else [filters] if filters else [])}
        for name, gpu in self.cat.gpus.items():
            if ids & {x.upper() for x in gpu.pciDeviceIds}:
                return name
        return None

    CR_HANDLED = frozenset({"default", "repository", "image", "version", "kernelModuleType", "usePrecompiled",
                            "nodeSelector", "imagePullPolicy", "imagePullSecrets", "upgradePolicy", "manager",
                            "startupProbe", "rdma", "priorityClassName", "licensingConfig"})

    def driver_cr_notes(self, cr: dict) -> None:
        """NVIDIADriver fields a pool cannot carry (gpuop writes them from the cluster-wide settings)."""
        spec = cr.get("spec") or {}
        name = (cr.get("metadata") or {}).get("name")
        for key, value in spec.items():
            if key in self.CR_HANDLED or (key == "driverType" and value == "gpu") or (
                    key == "tolerations" and value == (get(self.v, "daemonsets.tolerations") or UPSTREAM_TOLERATIONS)):
                continue
            self.note("driver", f"NVIDIADriver {name} {key}: {_short(value)} cannot be expressed per pool; gpuop "
                      "writes the cluster-wide setting")
            self.unexpressed.append(f"nvidiadriver.{name}.{key}")

    def pools(self, strategy: str) -> list[CommentedMap]:
        pools: list[CommentedMap] = []
        release_driver = self.release.components["driver"].version
        cluster_driver = str(get(self.v, "driver.version") or release_driver)
        for cr in self.drivers:
            self.driver_cr_notes(cr)
            spec = cr.get("spec") or {}
            sel = spec.get("nodeSelector") or {}
            if spec.get("default") or not sel:
                continue
            p = CommentedMap(name=_pool_name(cr["metadata"]["name"]), gpu=PLACEHOLDER_GPU, nodeSelector=dict(sel))
            p.yaml_add_eol_comment(f"{NOTE} the NVIDIADriver does not name the GPU model; set it", "gpu")
            if str(spec.get("version")) != cluster_driver:
                p["driver"] = CommentedMap(version=str(spec.get("version")))
            pools.append(p)
        mig = self.config_data("migManager", "config.yaml")
        if isinstance(mig, str):
            try:
                configs = (yaml.safe_load(mig) or {}).get("mig-configs") or {}
            except yaml.YAMLError:
                configs = {}
            for name, entries in configs.items():
                entry = next((e for e in entries or [] if e.get("mig-enabled") and e.get("mig-devices")), None)
                if entry is None:
                    continue
                gpu = self.gpu_of(entry.get("device-filter"))
                p = CommentedMap(name=_pool_name(name), gpu=gpu or PLACEHOLDER_GPU,
                                 mig=CommentedMap(strategy=strategy, layout=dict(entry["mig-devices"])))
                p.yaml_add_eol_comment(f"{NOTE} nodes of this pool carried nvidia.com/mig.config={name}; add their "
                                       "nodeSelector" + ("" if gpu else "; the GPU model is a placeholder"), "name")
                pools.append(p)
        plugin = self.config_data("devicePlugin")
        for key, text in sorted((plugin or {}).items()) if isinstance(plugin, dict) else []:
            try:
                cfg = yaml.safe_load(text) or {}
            except yaml.YAMLError:
                continue
            sharing = cfg.get("sharing") or {}
            ts, mps = sharing.get("timeSlicing"), sharing.get("mps")
            if not (ts or mps):
                continue
            kind, body = ("timeSlicing", ts) if ts else ("mps", mps)
            res = body.get("resources") or []
            reps = {r.get("replicas") for r in res}
            section = CommentedMap()
            if len(reps) == 1 and all(r.get("name") == "nvidia.com/gpu" for r in res) or kind == "mps":
                section["replicas"] = reps.pop() if reps else 2
            else:
                section["resources"] = [{"name": r["name"], "replicas": r["replicas"]} for r in res]
            for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
                if body.get(flag) and not (kind == "mps" and flag == "failRequestsGreaterThanOne"):
                    section[flag] = True
            p = CommentedMap(name=_pool_name(key), gpu=PLACEHOLDER_GPU, sharing=CommentedMap({kind: section}))
            p.yaml_add_eol_comment(f"{NOTE} nodes of this pool carried nvidia.com/device-plugin.config={key}; add "
                                   "their nodeSelector and GPU model", "name")
            pools.append(p)
        if not pools:
            p = CommentedMap(name="gpu", gpu=PLACEHOLDER_GPU)
            if strategy != "single":
                p["mig"] = CommentedMap(strategy=strategy)
            p.yaml_add_eol_comment(f"{NOTE} the operator's input names no GPU model; set it", "gpu")
            pools.append(p)
        return pools

    # ---- the profile

    def profile(self, name: str) -> CommentedMap:
        openshift = bool(self.take("platform.openshift"))
        m = self.release.matrix
        spec = CommentedMap()
        if openshift:
            version = m.openshift[-1]
            spec["platform"] = CommentedMap(type="openshift", version=version)
            spec["os"] = f"rhcos{version}"
        else:
            spec["platform"] = CommentedMap(type="kubernetes", version=m.kubernetes[0])
            spec["os"] = "ubuntu24.04"
        spec.yaml_add_eol_comment(f"{NOTE} the operator's input does not say; set your cluster's version", "platform")
        spec.yaml_add_eol_comment(f"{NOTE} the operator's input does not say; set your nodes' OS", "os")
        delivery_op = CommentedMap()
        delivery_op["install"] = "olm" if openshift and self.policy else "helm"
        spec["delivery"] = CommentedMap(mode="operator", operator=delivery_op)
        registry = self.registry()
        if registry and registry != self.release.registry:
            spec["images"] = CommentedMap(registry=registry)
        pull = self.take("driver.imagePullSecrets") or []
        policy = self.take("driver.imagePullPolicy")
        if pull or (policy and policy != "IfNotPresent"):
            images = spec.setdefault("images", CommentedMap())
            if pull:
                images["pullSecrets"] = list(pull)
            if policy and policy != "IfNotPresent":
                images["pullPolicy"] = policy
        self.driver(spec, delivery_op)
        if not spec["driver"]:
            del spec["driver"]
        for key in COMPONENTS:
            if key != "driver":
                self.component(key, spec, registry)
        self.dcgm_exporter(spec)
        tol = self.take("daemonsets.tolerations")
        prio = self.take("daemonsets.priorityClassName")
        ds = CommentedMap()
        if tol is not None and tol != UPSTREAM_TOLERATIONS:
            ds["tolerations"] = tol
        if prio and prio != "system-node-critical":
            ds["priorityClassName"] = prio
        if ds:
            spec["daemonsets"] = ds
        nfd = self.take("nfd.enabled")
        if nfd is not None and bool(nfd) != (not openshift):
            spec["nfd"] = CommentedMap(mode="deploy" if nfd else "existing")
        for key in ("gds", "gdrcopy"):
            if self.take(f"{key}.enabled"):
                delivery_op[key] = True
        if self.take("clusterPolicy.deployCR") is False:
            delivery_op["clusterPolicy"] = False
        if self.take("gpuCluster.deployCR"):
            delivery_op["gpuCluster"] = True
        for path in ("operator.runtimeClass", "operator.use_ocp_driver_toolkit", "cdi.enabled",
                     "hostPaths.kubeletRootDir", "mig.strategy"):
            self.used.add(path)
        if get(self.v, "cdi.enabled") is False:
            self.note("delivery", "cdi.enabled: false -- gpuop always runs CDI (the operator's default)")
            self.unexpressed.append("cdi.enabled")
        strategy = get(self.v, "mig.strategy") or "single"
        spec["nodePools"] = CommentedSeq(self.pools(strategy))
        if strategy != "single" and not any(p.get("mig", {}).get("layout") for p in spec["nodePools"]):
            self.note("delivery", f"mig.strategy: {strategy} without a MIG layout -- gpuop derives the strategy from "
                      "the pools' layouts (single when none)")
            self.unexpressed.append("mig.strategy")
        self.report_rest(spec)
        doc = CommentedMap(apiVersion="gpuop/v1alpha1", kind="ClusterProfile", metadata=CommentedMap(name=name),
                           spec=spec)
        for section, texts in self.notes.items():
            key = section if section in spec else "delivery"
            spec.yaml_set_comment_before_after_key(key, before="\n".join(f"{NOTE} {t}" for t in texts), indent=2)
        return doc

    def report_rest(self, spec) -> None:
        """Every leaf nothing mapped, that differs from NVIDIA's chart default: a comment, by section."""
        for key, value in leaves(self.v):
            if not key:                  # no values at all (only CRs were given)
                continue
            path = ".".join(key)
            if path in self.used or any(path.startswith(u + ".") for u in self.used):
                continue
            default = get_t(self.defaults, key, KeyError)
            if default == value or (value in ({}, [], "", None) and default in (KeyError, {}, [], "", None)):
                continue
            top = key[0]
            section = COMPONENTS.get(top, (None,))[0] or "delivery"
            if not self.defaults_known:
                shown = "unknown: pass --chart-defaults"
            else:
                shown = _short(default) if default is not KeyError else "none"
            self.note(section, f"{path}: {_short(value)} cannot be expressed in a gpuop profile (chart default: "
                      f"{shown})")
            self.unexpressed.append(path)


def _short(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text[:-4].strip() if text.endswith("...") else text
    return text if len(text) <= 80 else text[:77] + "..."


def _pool_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return name or "pool"


def import_documents(docs: list[tuple[str, dict]], name: str = "imported",
                     defaults: dict | None = None) -> tuple[str, list[str]]:
    """Documents -> (profile text, values paths reported as not expressible)."""
    cat = catalog_mod.load()
    values: dict = {}
    drivers, cms, policy, ignored = [], {}, False, []
    for shown, d in docs:
        kind = d.get("kind")
        if kind == "ClusterPolicy":
            values = values_from_policy(d.get("spec") or {})
            policy = True
        elif kind == "NVIDIADriver":
            drivers.append(d)
        elif kind == "ConfigMap":
            cms[(d.get("metadata") or {}).get("name")] = d
        elif kind is None and "apiVersion" not in d:
            values = _merge(values, d)
        else:
            ignored.append(f"{shown}: {kind}/{(d.get('metadata') or {}).get('name')}")
    default_cr = next((d.get("spec") or {} for d in drivers if (d.get("spec") or {}).get("default")), None)
    if isinstance(default_cr, dict) and isinstance(values.get("driver", {}), dict):   # NVIDIADriver CRD mode:
        drv = values.setdefault("driver", {})                # the default CR, not the ClusterPolicy, has the driver
        for k in ("version", "repository", "image", "kernelModuleType", "usePrecompiled", "imagePullPolicy",
                  "imagePullSecrets"):
            if k in default_cr:
                drv.setdefault(k, default_cr[k])
    imp = Importer(values, drivers, cms, policy, cat, defaults)
    try:
        doc = imp.profile(name)
    except (TypeError, AttributeError, ValueError, KeyError) as exc:   # a field of the wrong shape: unreadable
        files = ", ".join(sorted({s for s, _ in docs}))
        raise UserError(Issue(files, 0, 0, "", f"cannot read as operator values or ClusterPolicy: a field has the "
                              f"wrong shape ({type(exc).__name__}: {exc})")) from None
    if ignored:
        doc["spec"].yaml_set_comment_before_after_key(
            "delivery", before="\n".join(f"{NOTE} ignored {i} (not an operator input)" for i in ignored), indent=2)
    out = io.StringIO()
    y = YAML()
    quote_ambiguous(y)          # strings every YAML 1.1 and 1.2 reader types alike (kube/yamlio.py)
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 120
    out.write("# Imported by `gpuop import` from " + ", ".join(sorted({s for s, _ in docs})) + ".\n"
              "# Lines starting with 'gpuop import:' name settings gpuop cannot express and placeholders to set.\n")
    y.dump(doc, out)
    return out.getvalue(), sorted(set(imp.unexpressed))


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def run(paths: list[Path], output: Path | None, name: str | None = None, chart_defaults: Path | None = None) -> str:
    docs = read_inputs(paths)
    defaults = None
    if chart_defaults is not None:
        found = read_inputs([chart_defaults])
        defaults = found[0][1] if found else {}
    text, _ = import_documents(docs, name or _pool_name(paths[0].stem) or "imported", defaults)
    if output is not None:
        output.write_text(text)
    return text
