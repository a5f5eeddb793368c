"""deploy/kubernetes/cluster.py, the single-node cluster's script, as a module.

The script is the product's (operators run ``cluster.sh up``): stdlib only, it
cannot import the tests, so the tests import it instead and use its helpers
where theirs would do the same job: the cluster's state and tools
(``tool``), processes naming a folder (``processes_naming``, ``cmdline``,
``terminate``), mounts under a folder (``mounts_under``), the cache folder
(``CACHE``). It is a script rather than a package, hence :func:`cluster_module`.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from types import ModuleType

from support import REPO

__all__ = ["CLUSTER_PY", "cluster_module"]

CLUSTER_PY = REPO / "deploy" / "kubernetes" / "cluster.py"


@functools.cache
def cluster_module() -> ModuleType:
    """deploy/kubernetes/cluster.py, loaded once from its file."""
    spec = importlib.util.spec_from_file_location("connect_runtime_cluster", CLUSTER_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: its dataclasses look their module up by name.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
