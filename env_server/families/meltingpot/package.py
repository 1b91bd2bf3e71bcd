"""Loading dm-meltingpot's substrate code without its bots.

``import meltingpot`` runs the package's ``__init__``, which imports ``meltingpot.bot`` and so
tensorflow (the scenarios' background bots are TensorFlow saved models), and
``meltingpot.substrate`` imports chex (and so jax) for a dataclass of its reactive observables.
The substrates need neither: a substrate is a Python config (``meltingpot.configs.substrates``)
that ``meltingpot.utils.substrates.builder`` turns into a dmlab2d environment running the Lua
files shipped in the package. So this module registers the ``meltingpot`` package object without
running its ``__init__`` and imports only those two modules; the family does the multi-player
bookkeeping itself (``env_server/families/meltingpot/game.py``), as the package's wrappers do.

Scenarios (substrates with background bots) do need tensorflow (the ``meltingpot-scenarios``
extra) and the assets tarball: the family lists them (``scenario_configs``:
``meltingpot.configs.scenarios``, which imports no tensorflow), plays them where both are there
(``bots.py`` loads the bots through the package's ``meltingpot.utils.policies`` modules, which
import tensorflow, dm-tree and dm-env only) and otherwise lists them as unavailable, with
``scenario_unavailable`` saying why.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

_LOCK = threading.Lock()


def _register_package() -> None:
    """Put the ``meltingpot`` package in ``sys.modules`` without executing its ``__init__``
    (which would import tensorflow). A package already imported is left as it is.

    Raises ModuleNotFoundError (name ``meltingpot``) when dm-meltingpot is not installed."""
    if "meltingpot" in sys.modules:
        return
    spec = importlib.util.find_spec("meltingpot")
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError("No module named 'meltingpot' (install it with "
                                  "`make install`, or python "
                                  "env_server/families/meltingpot/install_package.py)",
                                  name="meltingpot")
    module = importlib.util.module_from_spec(spec)
    sys.modules["meltingpot"] = module


@dataclass(frozen=True)
class Modules:
    """The package modules the family uses: ``configs`` (``meltingpot.configs.substrates``:
    ``SUBSTRATES``, ``get_config``) and ``builder`` (``meltingpot.utils.substrates.builder``)."""

    configs: Any
    builder: Any


_MODULES: Modules | None = None


def modules() -> Modules:
    """Import (once) and return the substrate modules. Raises ModuleNotFoundError when
    dm-meltingpot or one of its substrate dependencies (dmlab2d, ml_collections, ...) is
    missing."""
    global _MODULES
    with _LOCK:
        if _MODULES is None:
            _register_package()
            configs: ModuleType = importlib.import_module("meltingpot.configs.substrates")
            builder: ModuleType = importlib.import_module("meltingpot.utils.substrates.builder")
            _MODULES = Modules(configs=configs, builder=builder)
        return _MODULES


def scenario_configs() -> Mapping[str, Any]:
    """Melting Pot's ``SCENARIO_CONFIGS`` (scenario name -> ``ScenarioConfig``: description,
    tags, substrate, roles, ``is_focal``, bots by role), imported without tensorflow (the
    config module imports only the substrate configs). Raises ModuleNotFoundError as
    ``modules``."""
    modules()
    scenarios: ModuleType = importlib.import_module("meltingpot.configs.scenarios")
    configs: Mapping[str, Any] = scenarios.SCENARIO_CONFIGS
    return configs


#: The environment variable naming the assets (tarball or folder) for the whole env server:
#: with it (and tensorflow) ``ListTasks`` lists the scenarios as available, so that ``moria
#: eval``'s preflight lets them run; an open's ``assets`` option overrides it.
ASSETS_ENV = "MORIA_MELTINGPOT_ASSETS"

#: ``scenario_unavailable``'s sentences (the reasons a scenario cannot be opened here).
NEEDS_ASSETS_AND_TENSORFLOW = (
    "needs the Melting Pot assets tarball (meltingpot_kwargs.assets=PATH) and tensorflow, "
    "which the meltingpot extra does not install")
NEEDS_TENSORFLOW = (
    "needs tensorflow (the background bots in the assets are TensorFlow saved models): "
    "install the meltingpot-scenarios extra")
NEEDS_ASSETS = (
    "needs the Melting Pot assets tarball, whose background bots (TensorFlow saved models) "
    "this server's tensorflow runs: pass meltingpot_kwargs.assets=PATH, and for moria eval "
    f"start the env server with {ASSETS_ENV}=PATH")


def tensorflow_installed() -> bool:
    """Whether ``import tensorflow`` can find the package (it is not imported here)."""
    return importlib.util.find_spec("tensorflow") is not None


def default_assets() -> str | None:
    """The env server's assets path (``MORIA_MELTINGPOT_ASSETS``), or None when unset or
    empty. Not checked here (``family.open`` checks the path it uses)."""
    value = os.environ.get(ASSETS_ENV, "").strip()
    return value or None


def scenario_unavailable(assets: bool = False) -> str:
    """Why this server cannot open a scenario, or "" when nothing is missing.

    ``assets``: whether an assets path is known (the open's ``assets`` option or the server's
    ``MORIA_MELTINGPOT_ASSETS``; ``ListTasks`` takes no options, so its reason knows only the
    latter). Without tensorflow the reason is the missing tarball and tensorflow, or tensorflow
    alone; with tensorflow it is the missing tarball, or "" once one is known (its content is
    checked when a scenario opens: ``bots.Assets``)."""
    if not tensorflow_installed():
        return NEEDS_TENSORFLOW if assets else NEEDS_ASSETS_AND_TENSORFLOW
    return "" if assets else NEEDS_ASSETS
