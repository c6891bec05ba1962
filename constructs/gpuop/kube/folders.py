"""The output folders of a cluster (paths relative to dist/<cluster>/): the ones every index.json entry names,
written by outputs/target.py `Folders`, read back by the integrity checks of a compiled output
(pipeline/integrity.py, pipeline/previous.py, verify/output.py), and the folders of one delivery that readers of a
compiled output (ops/impact.py, rehearse/objects.py, the cdk8s app) look into. Here, in the stage every other may
import, so each name is spelled once."""

ENTRY_FOLDERS = ("chart", "manifests", "overlay", "argocd", "flux")
FLUX_OVERLAY = "flux-overlay"   # stack mode: Flux Kustomizations applying overlay/ (index.json `fluxOverlay`)
PREVIEW = "preview"             # operator mode: the operands gpuop would render, for review only
ADDONS = "addons"               # operator mode: gpuop's own objects beside NVIDIA's operator (outputs/addons.py)
