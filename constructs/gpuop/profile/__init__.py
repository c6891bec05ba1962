"""Stage 1, profile: the declarative input. load.py reads a profile with positions and merges `extends`;
models.py is the contract; settings.py the project settings (gpuop.yaml); messages.py words pydantic's
errors as located issues. Nothing here knows the catalogs or the stages after it."""
