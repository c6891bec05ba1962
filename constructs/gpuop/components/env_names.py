"""The env names each component sets on its container itself, and the paths the driver mounts files at, apart from the construct modules (which
start Node on import): validate/distribution.py warns when a profile's `env` overrides one of them, and
tests check every render stays inside these sets. The component modules re-export them as GPUOP_ENV."""

from __future__ import annotations

# driver container (nvidia-driver-ctr)
DRIVER = frozenset({"NVIDIA_VISIBLE_DEVICES", "NODE_NAME", "NODE_IP", "KERNEL_MODULE_TYPE",
                       "OPEN_KERNEL_MODULES_ENABLED", "OPENSHIFT_VERSION", "GDS_ENABLED", "GDRCOPY_ENABLED"})
# toolkit container, any runtime
TOOLKIT = frozenset({
    "ROOT", "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "NVIDIA_VISIBLE_DEVICES", "TOOLKIT_PID_FILE",
    "NRI_NAMESPACE", "CDI_ENABLED", "NVIDIA_RUNTIME_SET_AS_DEFAULT", "NVIDIA_CONTAINER_RUNTIME_MODE",
    "CRIO_CONFIG_MODE", "RUNTIME", "CONTAINERD_RUNTIME_CLASS", "RUNTIME_CONFIG", "CONTAINERD_CONFIG", "CRIO_CONFIG",
    "DOCKER_CONFIG", "RUNTIME_DROP_IN_CONFIG", "RUNTIME_DROP_IN_CONFIG_HOST_PATH", "RUNTIME_SOCKET",
    "CONTAINERD_SOCKET", "DOCKER_SOCKET", "RUNTIME_CONFIG_SOURCE"})
# device plugin container
DEVICE_PLUGIN = frozenset({
    "PASS_DEVICE_SPECS", "FAIL_ON_INIT_ERROR", "DEVICE_LIST_STRATEGY", "DEVICE_ID_STRATEGY", "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES", "MPS_ROOT", "CONFIG_FILE", "MIG_STRATEGY", "NVIDIA_MIG_MONITOR_DEVICES",
    "CDI_ENABLED", "CDI_ANNOTATION_PREFIX", "NVIDIA_CDI_HOOK_PATH", "GDS_ENABLED", "MOFED_ENABLED", "GDRCOPY_ENABLED",
    "DP_DISABLE_HEALTHCHECKS", "DP_ENABLE_HEALTHCHECKS"})
# computed by gpuop from the driver's install config; a profile may never set it
DIGEST_ENV = "DRIVER_CONFIG_DIGEST"

# Where the driver image of each OS reads package repository files and extra CA certificates
# (object_controls.go RepoConfigPathMap / CertConfigPathMap, NVIDIA/gpu-operator main, read through the
# search tool). An OS ID missing here has no path upstream either (the Operator refuses it at run time;
# gpuop at compile time, validate/distribution.py).
REPO_CONFIG_PATHS = {"centos": "/etc/yum.repos.d", "debian": "/etc/apt/sources.list.d",
                     "ubuntu": "/etc/apt/sources.list.d", "rhcos": "/etc/yum.repos.d", "rhel": "/etc/yum.repos.d"}
CERT_CONFIG_PATHS = {"centos": "/etc/pki/ca-trust/extracted/pem", "debian": "/usr/local/share/ca-certificates",
                     "ubuntu": "/usr/local/share/ca-certificates", "rhcos": "/etc/pki/ca-trust/extracted/pem",
                     "rhel": "/etc/pki/ca-trust/extracted/pem", "sles": "/etc/pki/trust/anchors",
                     "sl-micro": "/etc/pki/trust/anchors"}
