"""`gpuop import FILE... [-o OUT] [--check]`: what a cluster runs today -> a profile in `delivery.mode: operator`.

Input (any mix, multi-document YAML and `kind: List` allowed, read within the profile loader's bounds:
ops/import_io.py): a values.yaml of NVIDIA's gpu-operator chart, or a ClusterPolicy with its NVIDIADriver CRs
and the ConfigMaps they reference (device-plugin config, mig-parted config, DCGM metrics). A ClusterPolicy is
first turned into the chart's value shape (useNvidiaDriverCRD -> driver.nvidiaDriverCRD.enabled,
upgradePolicy.podDeletion -> gpuPodDeletion, operator.use_ocp_driver_toolkit -> platform.openshift). Then the
mapping table (plan/chartmap.py), which operator mode's export reads too, decides every setting:
- a row's inverse gives the profile field (a value absent from the input is the chart default of the operator
  version, gpuop's catalog data: no copy of NVIDIA's values.yaml is needed);
- the derived rows (driver version and enablement, NFD, MIG strategy, per-pool configs, the ServiceMonitor
  switch, sidecar images) are rebuilt here from the same value paths;
- anything else that differs from the chart default is reported: a `# gpuop import:` comment at the section it
  belongs to, naming the setting, its value and why the profile cannot express it (the table's reason).
`--chart-defaults FILE` (another chart's values.yaml) additionally silences settings equal to that file.

Node pools come from the NVIDIADriver CRs (one pool per non-default CR: its nodeSelector and driver version),
the mig-parted config (one pool per named MIG config: layout from `mig-devices`, GPU model from the PCI ids of
`device-filter`) and the device-plugin config (one pool per sharing config; the config `default:` names is
the one of every node without a config label, and its comment says so). Facts the operator's input does not
hold -- the GPU model of a pool without a mig-parted entry, the platform version, the node OS, the kernels of
precompiled drivers -- get placeholders valid for the imported facts (a MIG pool's placeholder GPU can hold its
layout), named in the comment beside them.

Every string of the input that reaches a comment is escaped onto one line (import_io.one_line), and every
string value that a YAML 1.1 or 1.2 reader would not read back as plain text is double-quoted.

A config the nodes select by label (any but the one `config.default` names) is a pool with `labelsFrom: user`, and
the profile then sets `spec.nfd.rules: false`: the nodes carry the label already, and gpuop's NodeFeatureRule,
which matches GPU models, would relabel every node of the model (several configs for one model would not compile).

The profile is compiled before it is written or printed (`run`): one gpuop refuses is never written -- exit 2,
each error located in the profile text, which goes to stdout (`<stdout>:line:col`). `--check --profile FILE`
compares an existing profile (the imported one after hand edits) instead; its errors are located in FILE.

Exit codes: 0 with a profile; 2 for an input that cannot be read, has a value of the wrong shape (located), or
holds no operator configuration, for a profile gpuop refuses, a chart template that fails, and for an `-o` that
would overwrite, follow a symlink or leave the project; with `--check` (ops/import_check.py), 3 when the profile
does not reproduce the input.
"""

from __future__ import annotations

import copy
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gpuop import catalog as catalog_mod
from gpuop.errors import Issue, UserError
from gpuop.kube.yamlio import quote_ambiguous
from gpuop.ops import import_io, import_version
from gpuop.ops.import_io import Doc, one_line
from gpuop.plan import chartmap
from gpuop.plan import pools as plan_pools

NOTE = "gpuop import:"
UPSTREAM_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
PLACEHOLDER_GPU = "L40S"
# ------------------------------------------------------------------------------------------ reading

def read_inputs(paths: list[Path]) -> list[Doc]:
    """Every YAML mapping of the input files, read within the input bounds (ops/import_io.py)."""
    return import_io.read_inputs(paths)


def values_from_policy(spec: dict) -> dict:
    """A ClusterPolicy spec in the chart's value shape (the inverse of templates/clusterpolicy.yaml's renames)."""
    v = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    op = v.get("operator")
    if isinstance(op, dict) and isinstance(op.get("use_ocp_driver_toolkit"), bool):
        # the ClusterPolicy has no platform.openshift: the chart renders it only as the Driver Toolkit switch
        v.setdefault("platform", {"openshift": op["use_ocp_driver_toolkit"]})
    ds = v.get("daemonsets")
    labels = ds.get("labels") if isinstance(ds, dict) else None
    if isinstance(labels, dict) and labels.get("app.kubernetes.io/managed-by") == "gpu-operator" and \
            str(labels.get("helm.sh/chart", "")).startswith("gpu-operator-"):
        # the chart's own operand labels (templates/_helpers.tpl gpu-operator.operand-labels), rendered over
        # daemonsets.labels: it writes them again, they are not the user's
        ds["labels"] = {k: x for k, x in labels.items() if k not in ("app.kubernetes.io/managed-by", "helm.sh/chart")}
    d = v.setdefault("driver", {})
    if not isinstance(d, dict):
        return v
    if "useNvidiaDriverCRD" in d:
        d.setdefault("nvidiaDriverCRD", {})["enabled"] = d.pop("useNvidiaDriverCRD")
    up = d.get("upgradePolicy")
    if isinstance(up, dict) and "podDeletion" in up:
        up["gpuPodDeletion"] = up.pop("podDeletion")
    return v


# ------------------------------------------------------------------------------------------ the mapping

SECTIONS = ("platform", "os", "release", "delivery", "images", "driver", "toolkit", "cdi", "devicePlugin", "proxy", "hostPaths", "dcgm",
            "dcgmExporter",
            "gfd", "migManager", "nodeStatusExporter", "validator", "daemonsets", "nfd", "nodePools")
VALUE_SECTIONS = {k: (k if k in SECTIONS else "delivery") for k in chartmap.COMPONENTS}
DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


class Importer:
    """Chart values (or a ClusterPolicy in their shape), NVIDIADriver CRs and ConfigMaps -> a profile, through
    the mapping table (plan/chartmap.py): its inverse gives every setting a row covers; the derived rows (driver,
    NFD, MIG strategy, per-pool configs) are rebuilt here from the same value paths."""

    def __init__(self, got: Inputs, cat, defaults: dict | None = None, version: str = chartmap.DEFAULT_VERSION,
                 decided=None):
        self.got = got
        self.v = got.values
        self.drivers = got.drivers
        self.cms = got.configmaps
        self.policy = got.policy is not None
        self.cat = cat
        self.version = version
        self.decided = decided                  # import_version.Version: how the version was known
        # the stack release that ships this operator version: its images, driver and support matrix are the defaults
        self.release = next((r for r in cat.releases if r.operatorVersion == version), None) or cat.release(None)
        self.user_defaults = defaults            # --chart-defaults: settings equal to it are not reported either
        self.eff = chartmap.effective(self.v, version)
        self.notes: dict[str, list[str]] = {}       # profile section -> comments
        self.dropped_configs: list[tuple[str, str]] = []   # live configs no pool keeps
        self.unexpressed: list[str] = []            # values paths reported as not expressible
        self.user_labels = False                    # a pool's config label is on its nodes already

    def note(self, section: str, text: str) -> None:
        # strings of the input reach the comment: one line, escaped (a \r or \n would end the comment and
        # make the rest of the text profile fields)
        self.notes.setdefault(section, []).append(one_line(text))

    def lose(self, path: str, text: str) -> None:
        """A value the profile cannot express: commented at its section, listed as unexpressed."""
        self.note(VALUE_SECTIONS.get(path.split(".")[0], "delivery"), text)
        self.unexpressed.append(path)

    def eget(self, path: str, default=None):
        return chartmap.get_path(self.eff, path, default)

    # ---- config content referenced by name

    def config_data(self, key: str, item: str | None = None):
        """A component's config content: inline chart values (`config.data`) or the referenced ConfigMap."""
        name = self.eget(f"{key}.config.name")
        data = self.eget(f"{key}.config.data")
        if data in (None, {}, "") and name and name in self.cms:
            data = self.cms[name].get("data") or {}
        if item is None or isinstance(data, str):
            return data
        return (data or {}).get(item) if isinstance(data, dict) else None

    def embedded(self, key: str, item: str, text, what: str):
        """A config text inside a ConfigMap or the chart values, parsed within the input bounds (located)."""
        if not isinstance(text, str):
            return None
        name = self.eget(f"{key}.config.name")
        inline = self.eget(f"{key}.config.data")
        if not inline and name in self.cms and "_doc" in self.cms[name]:
            doc, loc = self.cms[name]["_doc"], ("data", item)
        else:
            doc, loc = _locate(self.got, (key, "config", "data", item))
        if doc is None:
            doc, loc = import_io.Doc("<input>", {}, {}), ()
        return import_io.embedded(doc, loc, text, what)

    def table_values(self) -> dict:
        """The values the table's inverse reads: the DCGM metrics CSV of a referenced ConfigMap inlined."""
        v = copy.deepcopy(self.v)
        name = self.eget("dcgmExporter.config.name")
        csv = self.config_data("dcgmExporter", "dcgm-metrics.csv")
        if name and isinstance(csv, str) and not self.eget("dcgmExporter.config.data"):
            chartmap.set_path(v, "dcgmExporter.config.data", csv)
        return v

    # ---- the derived rows

    def driver(self, spec: CommentedMap, op: CommentedMap) -> None:
        d = spec.setdefault("driver", CommentedMap())
        if self.eget("driver.enabled") is False:
            d["enabled"] = False
        version = self.eget("driver.version")
        release_driver = self.release.components["driver"].version
        if isinstance(version, str) and version.startswith("sha256:"):
            op["driverDigest"] = version
        elif version in (None, "") or str(version) == release_driver:
            pass
        elif re.match(r"^\d{3}(\.\d+){0,2}$", str(version)) and self.cat.branch(str(version)):
            d["version"] = str(version)
        else:
            self.lose("driver.version", f"driver.version {version!r} is not a driver version of gpuop's catalog; "
                      "the release default is used")
        if self.eget("driver.usePrecompiled") and d.get("enabled") is not False:
            d["kernels"] = CommentedSeq([PLACEHOLDER_KERNEL])
            _eol(d, f"{NOTE} precompiled drivers: the operator's input does not list the nodes' kernels "
                 "(`uname -r`); set them", "kernels")

    def nfd(self, spec: CommentedMap, openshift: bool) -> None:
        # a ClusterPolicy has no nfd.enabled (NFD is the chart's subchart): the platform's default then
        enabled = chartmap.get_path(self.v, "nfd.enabled") if self.policy else self.eget("nfd.enabled")
        if enabled is not None and bool(enabled) != (not openshift):
            spec["nfd"] = CommentedMap(mode="deploy" if enabled else "existing")

    def service_monitor(self, spec: CommentedMap, openshift: bool) -> None:
        enabled = self.eget("dcgmExporter.serviceMonitor.enabled")
        if enabled is not None and bool(enabled) != openshift:
            ex = spec.setdefault("dcgmExporter", CommentedMap())
            sm = ex.setdefault("serviceMonitor", CommentedMap())
            sm.insert(0, "enabled", bool(enabled))
        # a ClusterPolicy's absent interval is not the chart's 15s: the operator's ServiceMonitor then names none
        # and Prometheus scrapes at its own interval (the OperatorHub example's), which the profile cannot say
        sm = chartmap.get_path(self.v, "dcgmExporter.serviceMonitor") if self.policy else None
        if enabled and isinstance(sm, dict) and not sm.get("interval"):
            self.lose("dcgmExporter.serviceMonitor.interval", "dcgmExporter.serviceMonitor.interval: the "
                      "ClusterPolicy names none (Prometheus's own scrape interval) -- gpuop writes the profile's "
                      "(omitted: 15s)")

    def fixed_paths(self) -> None:
        # hostPaths.kubeletRootDir: the table's fixed row reports any other than the default
        extra = self.eget("extraObjects")
        if extra:
            self.lose("extraObjects", f"extraObjects: {len(extra) if isinstance(extra, list) else 1} object(s) -- "
                      "gpuop writes its own (per-pool NVIDIADriver CRs, NodeFeatureRule); add yours beside the profile")

    def sidecar_images(self, frag: dict) -> None:
        """GDS / GDRCopy / the operator's own image: gpuop's values take them from spec.images.registry."""
        registry = chartmap.get_path(frag, "images.registry") or self.release.registry
        want = {"gds.repository": f"{registry}/cloud-native", "gdrcopy.repository": f"{registry}/cloud-native",
                "operator.repository": registry}
        for path, repo in want.items():
            have = self.eget(path)
            if have not in (None, "", repo):
                self.lose(path, f"{path} {have!r}: gpuop's operator values take this image from the registry of "
                          f"every other image ({repo})")

    def nfd_image(self, spec: CommentedMap, op: CommentedMap, frag: dict, openshift: bool) -> None:
        """NFD's image under a registry mirror: gpuop's values put it at <mirror>/<NFD's path> unless nfdValues
        names one (plan/operator.py nfd_repository). So the mirror's own path is no setting of the profile, and an
        install that pulls NFD from elsewhere (its own registry included) keeps that repository in nfdValues."""
        registry, chart = chartmap.get_path(frag, "images.registry"), self.release.nfd
        mode = (spec.get("nfd") or {}).get("mode") or ("existing" if openshift else "deploy")
        if registry in (None, "", self.release.registry) or mode != "deploy" or chart is None:
            return
        values = op.get("nfdValues") or {}
        have = self.eget("node-feature-discovery.image.repository")
        image = values.get("image")
        if have == f"{registry}/{chart.image.path}" and isinstance(image, dict) and "repository" in image:
            del image["repository"]
            if not image:
                del values["image"]
            if not values:
                del op["nfdValues"]
        elif have in (None, ""):
            values = op.setdefault("nfdValues", CommentedMap())
            values.setdefault("image", CommentedMap())["repository"] = f"{chart.image.registry}/{chart.image.path}"
            _eol(op, f"{NOTE} NFD's image comes from its own registry, not the mirror of the other images",
                 "nfdValues")

    def config_names(self, pools: list) -> None:
        """What of the live configs the pools do not keep: the names and defaults are kept by the table
        (delivery.operator.*Config) and the pools' configName; a config gpuop cannot rebuild is reported."""
        for key in ("devicePlugin", "migManager"):
            name = self.eget(f"{key}.config.name")
            if name and not self.config_data(key):
                self.note(key if key in SECTIONS else "delivery", f"{key}.config.name {name!r}: its ConfigMap was "
                          "not given, so no pool comes from its configs and the profile leaves that ConfigMap to "
                          "you (give it to the import, kubectl get configmap -o yaml, to rebuild the pools)")
        mig_default = self.eget("migManager.config.default")
        if mig_default not in (None, "", plan_pools.ALL_DISABLED):
            self.lose("migManager.config.default", f"migManager.config.default {mig_default!r}: gpuop's MIG config "
                      f"of MIG-capable nodes without a {MIG_CONFIG_LABEL} label is {plan_pools.ALL_DISABLED}")
        for key, why in self.dropped_configs:
            self.lose(key, why)

    # ---- pools

    def gpu_of(self, filters) -> str | None:
        ids = {str(f).upper() for f in (filters if isinstance(filters, list) else [filters] if filters else [])}
        for name, gpu in self.cat.gpus.items():
            if ids & {x.upper() for x in gpu.pciDeviceIds}:
                return name
        return None

    def mig_placeholder(self, layout: dict | None) -> str:
        """A MIG-capable GPU model of the catalog that can hold `layout` (any MIG-capable one without a layout)."""
        from gpuop.mig.geometry import check_layout

        capable = [n for n, g in self.cat.gpus.items() if g.migCapable]
        preferred = sorted(capable, key=lambda n: (n != PLACEHOLDER_MIG_GPU, capable.index(n)))
        for name in preferred:
            if not layout or not check_layout(name, layout).problems:
                return name
        return PLACEHOLDER_MIG_GPU

    CR_HANDLED = frozenset({"default", "repository", "image", "version", "kernelModuleType", "usePrecompiled",
                            "nodeSelector", "imagePullPolicy", "imagePullSecrets", "upgradePolicy", "manager",
                            "startupProbe", "rdma", "priorityClassName", "licensingConfig"})

    def driver_cr_notes(self, cr: dict) -> None:
        """NVIDIADriver fields a pool cannot carry (gpuop writes them from the cluster-wide settings)."""
        spec = cr.get("spec") or {}
        name = cr["metadata"]["name"]
        for key, value in spec.items():
            if key in self.CR_HANDLED or (key == "driverType" and value == "gpu") or (
                    key == "tolerations" and value == (self.eget("daemonsets.tolerations") or UPSTREAM_TOLERATIONS)):
                continue
            self.note("driver", f"NVIDIADriver {name} {key}: {_short(value)} cannot be expressed per pool; gpuop "
                      "writes the cluster-wide setting")
            self.unexpressed.append(f"nvidiadriver.{name}.{key}")
        if spec.get("default") or not spec.get("nodeSelector"):
            return
        for key in CR_WRITTEN:            # what gpuop writes in every CR, from the cluster-wide settings
            if key not in spec:
                self.note("driver", f"NVIDIADriver {name} has no {key}; gpuop writes the cluster-wide setting in "
                          "every NVIDIADriver")
                self.unexpressed.append(f"nvidiadriver.{name}.{key}")

    def pools(self, strategy: str) -> list[CommentedMap]:
        pools: list[CommentedMap] = []
        release_driver = self.release.components["driver"].version
        cluster_driver = str(self.eget("driver.version") or release_driver)
        for cr in self.drivers:
            self.driver_cr_notes(cr)
            spec = cr.get("spec") or {}
            sel = spec.get("nodeSelector") or {}
            if spec.get("default") or not sel:
                continue
            p = CommentedMap(name=_pool_name(cr["metadata"]["name"]), gpu=PLACEHOLDER_GPU, nodeSelector=dict(sel))
            _eol(p, f"{NOTE} the NVIDIADriver does not name the GPU model; set it", "gpu")
            if str(spec.get("version")) != cluster_driver and spec.get("version"):
                p["driver"] = CommentedMap(version=str(spec.get("version")))
            pools.append(p)
        mig = self.config_data("migManager", "config.yaml")
        mig_default = self.eget("migManager.config.default")
        if isinstance(mig, str):
            configs = self.embedded("migManager", "config.yaml", mig, "the mig-parted config")
            configs = configs.get("mig-configs") if isinstance(configs, dict) else None
            for name, entries in (configs or {}).items() if isinstance(configs, dict) else []:
                entries = entries if isinstance(entries, list) else []
                entry = next((e for e in entries if isinstance(e, dict) and e.get("mig-enabled")
                              and isinstance(e.get("mig-devices"), dict)), None)
                if entry is None or len(entries) != 1 or set(entry) != MIG_ENTRY_KEYS or \
                        entry.get("devices") != "all" or not isinstance(entry.get("device-filter"), list):
                    if str(name) != plan_pools.ALL_DISABLED or entries != ALL_DISABLED_ENTRIES:
                        self.dropped_configs.append(("migManager.config.data", f"mig-parted config {name!r}: not "
                                                     "one layout on all GPUs of listed device ids (what a pool's "
                                                     "mig.layout writes); gpuop leaves it out"))
                    continue
                layout = {str(k): v for k, v in entry["mig-devices"].items()}
                gpu = self.gpu_of(entry.get("device-filter"))
                p = CommentedMap(name=_pool_name(str(name)), gpu=gpu or self.mig_placeholder(layout),
                                 mig=CommentedMap(strategy=strategy if strategy in ("single", "mixed") else "mixed",
                                                  layout=layout))
                self.config_name(p["mig"], "migManager", str(name))
                who = (f"every GPU node without a {MIG_CONFIG_LABEL} label runs this config (migManager.config."
                       f"default: {name})" if name == mig_default else
                       f"nodes labelled {MIG_CONFIG_LABEL}={name} run this config")
                _eol(p, f"{NOTE} {who}; add the pool's nodeSelector" + ("" if gpu else
                     "; the GPU model is a placeholder that can hold the layout"), "name")
                if name != mig_default:
                    self.labelled(p, MIG_CONFIG_LABEL, str(name))
                pools.append(p)
        plugin = self.config_data("devicePlugin")
        plugin_default = self.eget("devicePlugin.config.default")
        for key, text in sorted(plugin.items()) if isinstance(plugin, dict) else []:
            cfg = self.embedded("devicePlugin", key, text, "a device-plugin config")
            sharing = (cfg.get("sharing") if isinstance(cfg, dict) else None) or {}
            ts, mps = (sharing.get("timeSlicing"), sharing.get("mps")) if isinstance(sharing, dict) else (None, None)
            if not (isinstance(ts, dict) or isinstance(mps, dict)):
                if not (isinstance(cfg, dict) and set(cfg) <= {"version", "flags"} and
                        set(cfg.get("flags") or {}) <= {"migStrategy"}):
                    self.dropped_configs.append(("devicePlugin.config.data", f"device-plugin config {key!r}: "
                                                 "settings other than sharing and flags.migStrategy; gpuop leaves it out"))
                continue
            kind, body = ("timeSlicing", ts) if isinstance(ts, dict) else ("mps", mps)
            extra = (set(cfg) - {"version", "flags", "sharing"}) | (set(cfg.get("flags") or {}) - {"migStrategy"}) \
                | (set(sharing) - {kind}) | (set(body) - {"renameByDefault", "failRequestsGreaterThanOne", "resources"})
            if extra:
                self.dropped_configs.append(("devicePlugin.config.data", f"device-plugin config {key!r}: "
                                             f"{', '.join(sorted(map(str, extra)))} not kept (a pool's sharing "
                                             "holds time-slicing / MPS replicas and their two flags)"))
            res = [r for r in body.get("resources") or [] if isinstance(r, dict)]
            reps = {r.get("replicas") for r in res}
            section = CommentedMap()
            if len(reps) == 1 and all(r.get("name") == "nvidia.com/gpu" for r in res) or kind == "mps":
                section["replicas"] = reps.pop() if reps else 2
            else:
                section["resources"] = [{"name": r.get("name"), "replicas": r.get("replicas")} for r in res]
            for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
                if body.get(flag) and not (kind == "mps" and flag == "failRequestsGreaterThanOne"):
                    section[flag] = True
            p = CommentedMap(name=_pool_name(str(key)), gpu=PLACEHOLDER_GPU, sharing=CommentedMap({kind: section}))
            self.config_name(p["sharing"], "devicePlugin", str(key))
            who = (f"every GPU node without a {DEVICE_PLUGIN_LABEL} label runs this config (devicePlugin.config."
                   f"default: {key})" if key == plugin_default else
                   f"nodes labelled {DEVICE_PLUGIN_LABEL}={key} run this config")
            _eol(p, f"{NOTE} {who}; add the pool's nodeSelector and GPU model", "name")
            if key != plugin_default:
                self.labelled(p, DEVICE_PLUGIN_LABEL, str(key))
            pools.append(p)
        if not pools:
            mig_pool = strategy == "mixed" or (strategy == "single" and self.v_has("mig.strategy"))
            p = CommentedMap(name="gpu", gpu=self.mig_placeholder(None) if strategy == "mixed" else PLACEHOLDER_GPU)
            if mig_pool and strategy != "single":
                p["mig"] = CommentedMap(strategy=strategy)
            _eol(p, f"{NOTE} the operator's input names no GPU model; set it", "gpu")
            pools.append(p)
        return pools

    def labelled(self, pool: CommentedMap, label: str, value: str) -> None:
        """A pool whose nodes already carry their config label: the user labelled them (labelsFrom: user), and
        no NodeFeatureRule of gpuop's may set it, since NFD matches a GPU model and would label every node of
        that model (spec.nfd.rules: false, written by `profile`)."""
        pool["labelsFrom"] = "user"
        _eol(pool, f"{NOTE} its nodes carry {label}={value} already (you labelled them); gpuop writes no "
             "NodeFeatureRule, which would label every node of the GPU model", "labelsFrom")
        self.user_labels = True

    def config_name(self, section: CommentedMap, key: str, name: str) -> None:
        """The live config's key kept as the pool's configName: it is the value of the nodes' config label."""
        if CONFIG_NAME.match(name) and len(name) <= 63:
            section["configName"] = name
        else:
            self.lose(f"{key}.config.data", f"{key} config {name!r} is no label value (at most 63 letters, digits, "
                      "'.', '_' or '-', alphanumeric at both ends): no node can select it; gpuop names it itself")

    def v_has(self, path: str) -> bool:
        return chartmap.get_path(self.v, path, KeyError) is not KeyError

    # ---- the profile

    def profile(self, name: str) -> CommentedMap:
        frag, lost = chartmap.values_to_profile(self.table_values(), self.version)
        openshift = chartmap.get_path(frag, "platform.type") == "openshift"
        m = self.release.matrix
        spec = CommentedMap()
        if openshift:
            version = m.openshift[-1]
            spec["platform"] = CommentedMap(type="openshift", version=version)
            spec["os"] = f"rhcos{version}"
        else:
            spec["platform"] = CommentedMap(type="kubernetes", version=m.kubernetes[0])
            spec["os"] = "ubuntu24.04"
        distribution = chartmap.get_path(frag, "platform.distribution")
        if distribution:                 # known from the toolkit's containerd paths (the table's row)
            spec["platform"]["distribution"] = distribution
        _eol(spec, f"{NOTE} the operator's input does not say; set your cluster's version", "platform")
        _eol(spec, f"{NOTE} the operator's input does not say; set your nodes' OS", "os")
        spec["release"] = self.release.name
        op = CommentedMap()
        op["version"] = self.version
        op["install"] = "olm" if (openshift and self.policy) or self.got.subscription is not None else "helm"
        sub = self.got.subscription.data["spec"] if self.got.subscription is not None else {}
        if sub.get("installPlanApproval") == "Automatic":      # the profile's omitted is Manual
            op["installPlanApproval"] = "Automatic"
        for k, v in (chartmap.get_path(frag, "delivery.operator") or {}).items():
            op[k] = v
        spec["delivery"] = CommentedMap(mode="operator", operator=op)
        if self.decided is not None:
            why = (f"read from {self.decided.reason}" if self.decided.state == "read" else self.decided.reason)
            _eol(op, f"{NOTE} {one_line(why)}", "version")
        for section in SECTIONS:
            if section in ("platform", "os", "delivery", "nodePools"):
                continue
            if isinstance(frag.get(section), dict) and frag[section]:
                spec[section] = _commented(frag[section])
        self.driver(spec, op)
        if not spec.get("driver"):
            spec.pop("driver", None)
        self.service_monitor(spec, openshift)
        self.nfd(spec, openshift)
        self.fixed_paths()
        self.sidecar_images(frag)
        self.nfd_image(spec, op, frag, openshift)
        strategy = self.eget("mig.strategy") or ""
        pools = self.pools(strategy or "mixed")
        spec["nodePools"] = CommentedSeq(pools)
        if self.user_labels:
            nfd = spec.setdefault("nfd", CommentedMap())
            nfd["rules"] = False
            _eol(nfd, f"{NOTE} the nodes carry their config labels already; a NodeFeatureRule matches GPU "
                 "models and would relabel every node of a model", "rules")
        self.config_names(pools)
        defaults = chartmap.chart_defaults(self.version)
        by_dotted: dict[str, list] = {}
        for key, _ in _leaves(self.v):
            by_dotted.setdefault(".".join(key), []).append(key)
        for path, why in lost:
            keys = by_dotted.get(path, [])
            # a key holding dots (an annotation, a label) makes a dotted path ambiguous: judge it on the real keys
            if keys and all(_at(self.v, k) == _at(defaults, k) for k in keys):
                continue
            value = _at(self.v, keys[0]) if keys else chartmap.get_path(self.v, path, chartmap.get_path(self.eff, path))
            if self.user_defaults is not None and chartmap.get_path(self.user_defaults, path, KeyError) == value:
                continue
            default = chartmap.get_path(chartmap.chart_defaults(self.version), path, KeyError)
            shown = _short(default) if default is not KeyError else "none"
            self.lose(path, f"{path}: {_short(value)} cannot be expressed in a gpuop profile: {why} "
                      f"(chart default: {shown})")
        ordered = CommentedMap()
        for key in SECTIONS:
            if key in spec:
                ordered[key] = spec[key]
        for key in ("platform", "os"):
            if key in spec.ca.items:
                ordered.ca.items[key] = spec.ca.items[key]
        spec = ordered
        doc = CommentedMap(apiVersion="gpuop/v1alpha1", kind="ClusterProfile", metadata=CommentedMap(name=name),
                           spec=spec)
        for section, texts in self.notes.items():
            key = section if section in spec else "delivery"
            spec.yaml_set_comment_before_after_key(key, before="\n".join(f"{NOTE} {t}" for t in texts), indent=2)
        return doc


PLACEHOLDER_MIG_GPU = "H100-SXM5-80GB"
CONFIG_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")     # profile/models.py ConfigName
MIG_ENTRY_KEYS = {"device-filter", "devices", "mig-enabled", "mig-devices"}
ALL_DISABLED_ENTRIES = [{"devices": "all", "mig-enabled": False}]
CR_WRITTEN = ("kernelModuleType", "usePrecompiled", "imagePullPolicy", "upgradePolicy", "tolerations",
              "priorityClassName", "manager")
PLACEHOLDER_KERNEL = "6.8.0-60-generic"


def _commented(node):
    if isinstance(node, dict):
        out = CommentedMap()
        for k, v in node.items():
            out[k] = _commented(v)
        return out
    if isinstance(node, list):
        return CommentedSeq([_commented(v) for v in node])
    return node


def _leaves(node, path: tuple = ()):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from _leaves(v, path + (str(k),))
    else:
        yield path, node


def _at(node, path: tuple, default=KeyError):
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _eol(node: CommentedMap, text: str, key: str) -> None:
    node.yaml_add_eol_comment(one_line(text), key)


def _short(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text[:-4].strip() if text.endswith("...") else text
    return text if len(text) <= 80 else text[:77] + "..."


def _pool_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return name or "pool"


OBJECT_KINDS = ("ClusterPolicy", "NVIDIADriver", "ConfigMap", "Subscription")
OLM_GROUP = "operators.coreos.com/"


@dataclass
class Inputs:
    """The documents of an import, sorted by what they are to the operator."""
    values: dict = field(default_factory=dict)       # chart values (a values file, or the ClusterPolicy's spec)
    policy: Doc | None = None
    subscription: Doc | None = None                 # OLM's Subscription of the operator (its channel, approval)
    value_docs: list = field(default_factory=list)
    drivers: list = field(default_factory=list)      # NVIDIADriver objects (plain)
    configmaps: dict = field(default_factory=dict)   # name -> ConfigMap (plain)
    ignored: list = field(default_factory=list)      # "file: Kind/name" of objects that are no operator input
    driver_docs: dict = field(default_factory=dict)  # NVIDIADriver name -> its document (positions)
    files: list = field(default_factory=list)
    version: str = chartmap.DEFAULT_VERSION           # the GPU Operator version the install runs (import_version)


def _kind_name(doc: Doc) -> tuple[str, str]:
    kind = doc.data.get("kind")
    meta = doc.data.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return (kind if isinstance(kind, str) else repr(kind)), (name if isinstance(name, str) else repr(name))


def classify(docs: list[Doc], top_keys) -> Inputs:
    """Sort the documents; every wrong shape is a located issue, and an input with no operator configuration
    (no ClusterPolicy, NVIDIADriver or chart values) is refused rather than imported as a default profile."""
    got = Inputs(files=sorted({d.file for d in docs}))
    issues: list[Issue] = []
    for doc in docs:
        d = doc.data
        if "kind" not in d and "apiVersion" not in d:          # chart values
            known = [k for k in d if k in top_keys]
            if not known:
                issues.append(doc.issue((), "no key of NVIDIA's gpu-operator chart values (driver, toolkit, "
                                        "devicePlugin, mig, ...) and no Kubernetes kind: not an operator input"))
                continue
            got.value_docs.append(doc)
            got.values = _merge(got.values, d)
            continue
        kind = d.get("kind")
        if not isinstance(kind, str):
            issues.append(doc.issue(("kind",), "must be a string (the object's kind)"))
            continue
        if kind not in OBJECT_KINDS or (kind == "Subscription" and not str(d.get("apiVersion", "")).startswith(
                OLM_GROUP)):
            got.ignored.append(f"{doc.file}: {'/'.join(_kind_name(doc))}")
            continue
        meta = d.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
            issues.append(doc.issue(("metadata", "name") if isinstance(meta, dict) else ("metadata",),
                                    f"a {kind} needs metadata.name (a string)"))
            continue
        if kind == "ConfigMap":
            data = d.get("data")
            if data is not None and (not isinstance(data, dict) or
                                     not all(isinstance(v, str) for v in data.values())):
                issues.append(doc.issue(("data",), "must be a mapping of file names to strings (a ConfigMap's data)"))
                continue
            got.configmaps[meta["name"]] = {**d, "_doc": doc}
            continue
        spec = d.get("spec")
        if not isinstance(spec, dict):
            issues.append(doc.issue(("spec",), f"must be a mapping (a {kind}'s spec), got "
                                    f"{'a list' if isinstance(spec, list) else 'no spec' if spec is None else 'a single value'}"))
            continue
        if kind == "Subscription":
            if got.subscription is not None:
                issues.append(doc.issue(("metadata", "name"), f"a second Subscription (the first is in "
                                        f"{got.subscription.file}:{got.subscription.where()[1]}); give the GPU "
                                        "Operator's only"))
                continue
            got.subscription = doc
        elif kind == "ClusterPolicy":
            if got.policy is not None:
                issues.append(doc.issue(("metadata", "name"), f"a second ClusterPolicy (the first is in "
                                        f"{got.policy.file}:{got.policy.where()[1]}); the operator reconciles one"))
                continue
            got.policy = doc
        else:
            got.drivers.append(d)
            got.driver_docs[meta["name"]] = doc
    if got.policy is not None and got.value_docs:
        first = got.value_docs[0]
        issues.append(first.issue((), f"chart values and a ClusterPolicy ({got.policy.file}) in one import: give "
                                  "one of them (the ClusterPolicy is what the chart rendered from the values)"))
    if not issues and got.policy is None and not got.value_docs and not got.drivers:
        found = "; found only " + ", ".join(i.split(": ", 1)[1] for i in got.ignored[:5]) if got.ignored else ""
        found += (" ConfigMap(s) " + ", ".join(sorted(got.configmaps))[:200]) if got.configmaps else ""
        for f in got.files:
            issues.append(Issue(f, 1, 1, "", "holds no operator configuration: no ClusterPolicy, NVIDIADriver or "
                                f"chart values{one_line(found)}; nothing to import"))
    if issues:
        raise UserError(issues)
    if got.policy is not None:
        got.values = values_from_policy(got.policy.data["spec"])
    return got


def _locate(got: Inputs, path: tuple) -> tuple[Doc | None, tuple]:
    """The document and field path a values path was read from."""
    if got.policy is not None:
        src = path
        for old, new in RENAMES.items():
            if src[:len(new)] == new:
                src = old + src[len(new):]
        return got.policy, ("spec",) + src
    for doc in reversed(got.value_docs):
        node = doc.data
        for part in path:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return doc, path
    return (got.value_docs[0] if got.value_docs else None), path


RENAMES = {("driver", "useNvidiaDriverCRD"): ("driver", "nvidiaDriverCRD", "enabled"),
           ("driver", "upgradePolicy", "podDeletion"): ("driver", "upgradePolicy", "gpuPodDeletion")}


def _type_word(value) -> str:
    return ("a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list) else
            "true/false" if isinstance(value, bool) else "a number" if isinstance(value, (int, float)) else
            "null" if value is None else "a string")


def shape_issues(got: Inputs, defaults: dict) -> list[Issue]:
    """Values whose type is not the chart's (a mapping where the chart has a mapping, a list where a list, a
    boolean where a boolean): NVIDIA's templates would fail on them or read them as something else."""
    issues: list[Issue] = []

    def walk(value, default, path):
        if value is None or default is None:
            return
        wrong = None
        if isinstance(default, dict):
            if not isinstance(value, dict):
                wrong = "a mapping"
            else:
                for k, v in value.items():
                    if k in default:
                        walk(v, default[k], path + (k,))
        elif isinstance(default, list):
            wrong = None if isinstance(value, list) else "a list"
        elif isinstance(default, bool):
            wrong = None if isinstance(value, bool) else "true or false"
        elif isinstance(default, int):
            wrong = None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
        elif isinstance(default, str) and isinstance(value, (dict, list)):
            wrong = "a string"
        if wrong:
            doc, loc = _locate(got, path)
            message = f"must be {wrong}, as in NVIDIA's chart (got {_type_word(value)})"
            issues.append(doc.issue(loc, message) if doc else Issue(got.files[0], 0, 0, ".".join(path), message))

    walk(got.values, defaults, ())
    return issues


def import_documents(docs: list[Doc], name: str = "imported",
                     defaults: dict | None = None) -> tuple[str, list[str]]:
    """Documents -> (profile text, values paths reported as not expressible)."""
    text, unexpressed, _ = import_profile(docs, name, defaults)
    return text, unexpressed


def import_profile(docs: list[Doc], name: str = "imported", defaults: dict | None = None):
    """Documents -> (profile text, values paths reported as not expressible, the profile's data)."""
    r = import_all(docs, name, defaults)
    return r.text, r.unexpressed, r.data


@dataclass
class Imported:
    text: str
    unexpressed: list
    data: dict
    inputs: Inputs


def import_all(docs: list[Doc], name: str = "imported", defaults: dict | None = None) -> Imported:
    cat = catalog_mod.load()
    known = chartmap.chart_defaults()          # the newest chart's keys name what chart values are
    got = classify(docs, set(known) | set(defaults or {}))
    decided = import_version.decide(docs)
    got.version = decided.version
    issues = shape_issues(got, chartmap.chart_defaults(decided.version))
    if issues:
        raise UserError(issues)
    default_cr = next((d["spec"] for d in got.drivers if d["spec"].get("default")), None)
    if default_cr is not None and isinstance(got.values.get("driver", {}), dict):   # NVIDIADriver CRD mode: the
        drv = got.values.setdefault("driver", {})          # default CR, not the ClusterPolicy, has the driver
        for k in ("version", "repository", "image", "kernelModuleType", "usePrecompiled", "imagePullPolicy",
                  "imagePullSecrets"):
            if k in default_cr:
                drv.setdefault(k, copy.deepcopy(default_cr[k]))
    imp = Importer(got, cat, defaults, decided.version, decided)
    for i in got.ignored:
        imp.note("delivery", f"ignored {i} (not an operator input)")
    doc = imp.profile(name)
    import_io.plain_or_quoted(doc)
    out = io.StringIO()
    y = YAML()
    quote_ambiguous(y)          # strings every YAML 1.1 and 1.2 reader types alike (kube/yamlio.py)
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 120
    out.write("# Imported by `gpuop import` from " + one_line(", ".join(got.files)) + ".\n"
              "# Lines starting with 'gpuop import:' name settings gpuop cannot express and placeholders to set.\n")
    y.dump(doc, out)
    return Imported(out.getvalue(), sorted(set(imp.unexpressed)), _plainify(doc), got)


def _plainify(node):
    if isinstance(node, dict):
        return {str(k): _plainify(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plainify(v) for v in node]
    if isinstance(node, str):
        return str(node)
    return node


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


STDOUT = "<stdout>"          # where the errors of a profile printed (not written) are located


def compiled(path: Path, label: str | None = None):
    """The plan of the profile at `path`, or a located UserError: in `path` itself, or at `label` (the profile
    text printed on stdout) for a scratch copy. What `import` writes and what `--check` reads both pass here."""
    from gpuop.pipeline.run import plan_all

    try:
        return plan_all([path])[0][0]
    except UserError as exc:
        raise UserError([Issue(label, i.line, i.col, i.path, f"the imported profile does not compile: {i.message}")
                         if label and i.file == str(path) else i for i in exc.issues]) from None


class ProfileRefused(UserError):
    """The imported profile does not compile: its text goes to stdout, so the errors' lines point into it."""

    def __init__(self, issues, text: str):
        super().__init__(issues)
        self.text = text


def run(paths: list[Path], output: Path | None, name: str | None = None, chart_defaults: Path | None = None,
        force: bool = False, check: bool = False, chart: Path | None = None,
        accept_unexpressed: bool = False, profile: Path | None = None,
        renderer: Path | None = None) -> tuple[str, int]:
    """(what to print on stdout, exit code): the profile, or with `check` the comparison (ops/import_check.py).

    The imported profile is compiled before it is written or printed: one gpuop refuses is never written (exit 2,
    every error located in the text, which goes to stdout). `profile` (with `check`): an existing profile, e.g.
    the imported one after hand edits, compared in place of a new import; its errors are located in it."""
    import tempfile

    if profile is not None and not check:
        raise UserError(Issue("--profile", 0, 0, "", "is for --check: the profile to compare with the live install"))
    if profile is not None and output is not None:
        raise UserError(Issue("--profile", 0, 0, "", "with -o: --check --profile reads a profile, it writes none"))
    docs = read_inputs(paths)
    defaults = None
    if chart_defaults is not None:
        found = import_io.read_file(chart_defaults)
        if len(found) != 1 or "kind" in found[0].data:
            raise UserError(Issue(found[0].file if found else str(chart_defaults), 1, 1, "",
                                  "--chart-defaults is NVIDIA's chart values.yaml: one YAML mapping"))
        defaults = found[0].data
    stem = paths[0].name.split(".")[0]
    result = import_all(docs, name or _pool_name(stem) or "imported", defaults)
    if check:
        from gpuop.verify import nvidia_chart

        if chart is not None and not (chart / "Chart.yaml").is_file():
            raise UserError(Issue(str(chart), 0, 0, "", "--chart is the folder of NVIDIA's gpu-operator chart (with "
                                  "Chart.yaml), e.g. from `helm pull nvidia/gpu-operator --version v26.7.0 --untar`"))
        if chart is None and nvidia_chart.default_chart(result.inputs.version) is None:
            raise UserError(Issue("--check", 0, 0, "", f"needs NVIDIA's gpu-operator chart: pass --chart DIR or set "
                                  f"{nvidia_chart.CHART_ENV}"))
    with tempfile.TemporaryDirectory(prefix="gpuop-import-") as tmp:
        scratch = Path(tmp) / "imported.yaml"
        if profile is None:
            scratch.write_text(result.text, encoding="utf-8")
            try:
                compiled(scratch, STDOUT)
            except UserError as exc:
                raise ProfileRefused(exc.issues, result.text) from None
        out, code = result.text, 0
        if check:
            from gpuop.ops import import_check

            target, label = (profile, None) if profile is not None else (scratch, STDOUT)
            from gpuop.ops import import_operands

            renderer = renderer or import_operands.default_renderer()
            diffs = import_check.check(result.inputs, target, result.unexpressed, _locate, chart, label, renderer)
            out, code = import_check.report(diffs, accept_unexpressed, operands=renderer is not None)
    if output is not None:
        import_io.write_profile(output, result.text, force=force)
        if not check:
            out = ""
    return out, code
