"""moria.grpc_defaults: the GRPC_EXPERIMENTS value every Moria process starts with."""

from __future__ import annotations

import os
import subprocess
import sys

from moria import grpc_defaults

#: Records GRPC_EXPERIMENTS at the moment ``grpc`` is first imported (an import hook), imports
#: a Moria package, opens a channel (gRPC core initialises and reads its experiments) and prints
#: what the hook saw.
_PROBE = """
import os, sys
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "grpc" and not seen:
            seen.append(os.environ.get("GRPC_EXPERIMENTS"))
        return None
sys.meta_path.insert(0, Spy())
import {package}
import grpc
grpc.insecure_channel("unix:///nonexistent-moria-probe.sock").close()
print(seen[0])
"""


def _probe(package: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROBE.format(package=package)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)


def _env_without_setting() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != grpc_defaults.EXPERIMENTS_VAR}


def test_apply_fills_in_a_missing_variable_only() -> None:
    environ: dict[str, str] = {}
    assert grpc_defaults.apply(environ) is True
    assert environ == {"GRPC_EXPERIMENTS": "-event_engine_client,-event_engine_listener"}
    mine = {"GRPC_EXPERIMENTS": "-some_experiment"}
    assert grpc_defaults.apply(mine) is False
    assert mine == {"GRPC_EXPERIMENTS": "-some_experiment"}
    empty = {"GRPC_EXPERIMENTS": ""}  # empty: gRPC's own defaults, kept
    assert grpc_defaults.apply(empty) is False
    assert empty == {"GRPC_EXPERIMENTS": ""}


def test_every_service_package_sets_it_before_grpc_loads_and_grpc_knows_the_names() -> None:
    for package in ("env_server", "agent_server", "orchestrator", "worker", "benchmarks"):
        done = _probe(package, _env_without_setting())
        assert done.stdout.strip() == grpc_defaults.default_experiments(), package
        # an experiment name the installed gRPC does not know is logged as an error
        assert "Unknown experiment" not in done.stderr, done.stderr


def test_a_value_from_the_users_environment_wins() -> None:
    done = _probe("orchestrator", {**_env_without_setting(), "GRPC_EXPERIMENTS": ""})
    assert done.stdout.strip() == ""
