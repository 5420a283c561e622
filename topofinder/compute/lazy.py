"""Modules loaded on first use: a module-level ``name = lazy_module("topofinder.x.y")`` is an
import like any other (tests/test_architecture.py reads it as one: layers and cycles are
checked), but the module runs only when an attribute of it is first read. For the options of
a command that most runs do not give (`search --robust`, `--phases`, `--from`): their modules
cost every search their import otherwise (docs/performance.md "Start-up imports")."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, executed when one of its attributes is first read
    (importlib.util.LazyLoader); its parent packages are imported now. The module it was,
    if already imported."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module
