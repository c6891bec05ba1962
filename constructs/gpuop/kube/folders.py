"""The output folders every cluster's index.json entry names (paths relative to dist/): written by
outputs/target.py `Folders.entry`, read back by the integrity checks of a compiled output (pipeline/write.py,
verify/output.py). Here, in the stage every other may import, so the list is spelled once."""

ENTRY_FOLDERS = ("chart", "manifests", "overlay", "argocd", "flux")
