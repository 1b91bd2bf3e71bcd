"""The BALROG worker's launch config, accepted by ``moria eval --config worker.json``.

A BALROG worker (as MOSAIC launches it) is configured by one flat JSON object::

    {"worker": "balrog", "model": "gpt-4o", "backend": "openai",
     "environment": "MiniHack-River-v0", "num_episodes": 5, "max_steps": 100,
     "history_window": 16, "parallel_workers": 4}

``worker_spec_data`` maps it onto the run-spec sections: ``backend`` -> ``client.client_name``
(its aliases ``claude``/``google`` apply), ``model`` -> ``client.model_id``, ``environment`` ->
the env family that hosts it plus ``tasks.<env>_tasks: [task]`` (any env id or task name
``moria tasks`` lists, ``<family>/<task>``, or a family / BALROG env name such as ``crafter``
for the family's default tasks: ``moria.families.resolve_environment``), ``num_episodes`` ->
``eval.num_episodes.<env>`` (per task, as BALROG counts), ``max_steps`` ->
``eval.max_steps_per_episode``, ``history_window`` -> ``agent.max_text_history``,
``parallel_workers`` -> ``eval.num_workers``. Only ``worker`` and ``environment`` are required;
the rest keep Moria's defaults. Values are validated by the run spec itself, so a bad value is
reported under its run-spec key.
"""

from __future__ import annotations

from typing import Any

from moria.families import EnvironmentRef, UnknownEnvironmentError, resolve_environment

#: Keys of the worker config, in the order they are documented.
WORKER_KEYS: tuple[str, ...] = (
    "worker", "model", "backend", "environment", "num_episodes", "max_steps", "history_window",
    "parallel_workers",
)

#: Worker keys that map one-to-one onto a run-spec key: worker key -> (section, field).
#: (``environment`` and ``num_episodes`` depend on the env family and are mapped apart.)
RUN_SPEC_KEYS: dict[str, tuple[str, str]] = {
    "backend": ("client", "client_name"),
    "model": ("client", "model_id"),
    "max_steps": ("eval", "max_steps_per_episode"),
    "parallel_workers": ("eval", "num_workers"),
    "history_window": ("agent", "max_text_history"),
}


class WorkerConfigError(ValueError):
    """A worker config that cannot be mapped; the message names the key and what is allowed."""


def is_worker_config(data: object) -> bool:
    """True for a mapping with a ``worker`` key (a run spec has sections instead)."""
    return isinstance(data, dict) and "worker" in data


def resolve(environment: str) -> EnvironmentRef:
    """The env family (and task) ``environment`` names: an env id or task name as ``moria
    tasks`` lists it, ``<family>/<task>``, a family name or BALROG's env name
    (``moria.families.resolve_environment``: the one resolver of environment names).

    Raises WorkerConfigError listing the forms accepted."""
    try:
        return resolve_environment(environment)
    except UnknownEnvironmentError as exc:
        raise WorkerConfigError(f"environment {exc}") from None


def worker_spec_data(config: dict[str, Any]) -> dict[str, Any]:
    """The run-spec data (sections) for a BALROG worker config. Raises WorkerConfigError for an
    unknown key (named, with the allowed keys), a worker other than ``balrog``, or a missing or
    unknown ``environment``."""
    unknown = [key for key in config if key not in WORKER_KEYS]
    if unknown:
        raise WorkerConfigError(
            f"unknown key {unknown[0]!r} in the worker config; allowed keys: "
            + ", ".join(WORKER_KEYS))
    if config.get("worker") != "balrog":
        raise WorkerConfigError(
            f"worker {config.get('worker')!r} is not supported; allowed: 'balrog'")
    environment = config.get("environment")
    if not isinstance(environment, str) or not environment:
        raise WorkerConfigError("the worker config needs 'environment' (an env id such as "
                                "'MiniHack-River-v0' or 'BabyAI-MixedTrainLocal-v0/goto')")
    ref = resolve(environment)
    env = ref.family
    data: dict[str, Any] = {"envs": {"names": env}}
    if ref.task is not None:  # None: the whole family, i.e. its default tasks
        data["tasks"] = {f"{env}_tasks": [ref.task]}
    if "num_episodes" in config:
        data["eval"] = {"num_episodes": {env: config["num_episodes"]}}
    for key, (section, field) in RUN_SPEC_KEYS.items():
        if key in config:
            data.setdefault(section, {})[field] = config[key]
    return data
