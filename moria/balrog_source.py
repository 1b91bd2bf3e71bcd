"""BALROG's own prompt code, loaded at run time from a checkout or an installed package.

``agent.protocol=balrog`` plays an episode the way BALROG's evaluator does, with BALROG's *own*
code and text: its agent classes (answer rule, extraction), its history prompt builder (roles,
window, labels), its instruction-prompt functions, its action-validity check
(``EnvWrapper.check_action_validity``), the invalid-action feedback statement of its evaluation
loop, and the defaults of its ``balrog/config/config.yaml``. None of it is copied into Moria:
:func:`load_balrog_source` imports it from the directory the user names in
``agent.balrog_source``, so a pinned BALROG commit gives exactly that commit's protocol.

BALROG's environment modules import packages only its own game wrappers need (``gym`` 0.23,
``baba``, NLE's language wrapper). The functions Moria calls never touch them, so while a BALROG
module is being imported, a module that a *BALROG* file imports and that is not installed is
replaced by an inert placeholder (:class:`_AbsentModuleFinder`); imports by any other module
fail as usual, and the placeholders are removed from ``sys.modules`` once loading ends. The one
table that does come from an uninstalled package, NLE's language wrapper's map from action to
name (read by BALROG's MiniHack instruction), is supplied by Moria (:data:`NLE_WRAPPER_MODULE`):
Moria's MiniHack action names are that wrapper's names, so the map is the identity.

One process holds at most one BALROG source (BALROG's modules import each other as ``balrog.*``).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moria.config import AgentConfig, ClientConfig
from moria.families import balrog_references

#: ``agent.type`` -> (BALROG module under ``balrog.agents``, class name).
AGENT_CLASSES: dict[str, tuple[str, str]] = {
    "naive": ("naive", "NaiveAgent"),
    "cot": ("chain_of_thought", "ChainOfThoughtAgent"),
    "robust_naive": ("robust_naive", "RobustNaiveAgent"),
    "robust_cot": ("robust_cot", "RobustCoTAgent"),
    "few_shot": ("few_shot", "FewShotAgent"),
}

#: The mark after a checkout's commit when its BALROG files differ from that commit.
DIRTY = "-dirty"


#: The NLE language-wrapper module BALROG's MiniHack instruction reads its action map from.
NLE_WRAPPER_MODULE = "nle.language_wrapper.wrappers.nle_language_wrapper"

#: The evaluation-loop statement that writes the invalid-action feedback into the next
#: observation (its assignment target, as ``ast.unparse`` prints it).
FEEDBACK_TARGET = "obs['text']['long_term_context']"

_LOCK = threading.Lock()
_LOADED: dict[Path, BalrogSource] = {}


class BalrogSourceError(ValueError):
    """The BALROG source named in ``agent.balrog_source`` cannot be used (message says why and
    what to point it at)."""


# -- placeholders for BALROG's uninstalled game dependencies


class _Inert(type):
    """Metaclass of placeholder classes: any attribute, item or call gives another placeholder,
    so module-level code of a BALROG game wrapper (base classes, constants) imports cleanly."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__name__}.{name}")

    def __getitem__(cls, key: Any) -> Any:
        return _placeholder(f"{cls.__name__}[]")

    def __iter__(cls) -> Iterator[Any]:
        return iter(())


def _placeholder(name: str) -> type:
    return _Inert(name.rsplit(".", 1)[-1], (), {"__qualname__": name,
                                                  "__init__": lambda self, *a, **k: None})


class _ActionNameMap(dict[Any, tuple[str]]):
    """Stands in for NLE's language wrapper's action map: Moria passes BALROG's MiniHack
    instruction the action *names*, so ``map[name][0]`` is the name itself."""

    def __missing__(self, name: Any) -> tuple[str]:
        return (str(name),)


class _AbsentModule(types.ModuleType):
    """A module a BALROG file imports but that is not installed: every attribute is inert."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        if name == NLE_WRAPPER_MODULE:
            self.NLELanguageWrapper = type("NLELanguageWrapper", (),
                                           {"all_nle_action_map": _ActionNameMap()})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{self.__name__}.{name}")


class _AbsentLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _AbsentModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _imported_by_balrog() -> bool:
    """True when the innermost non-import-machinery frame is a BALROG module's code."""
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not name.startswith(("importlib", "_frozen_importlib")) and name != __name__:
            return name == "balrog" or name.startswith("balrog.")
        frame = frame.f_back  # type: ignore[assignment]
    return False


class _AbsentModuleFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path`` while BALROG loads: a module no other finder found, imported
    from a BALROG file, becomes an :class:`_AbsentModule`; its name is remembered."""

    def __init__(self) -> None:
        self.placed: set[str] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "balrog" or fullname.startswith("balrog."):
            return None
        if not _imported_by_balrog():
            return None
        self.placed.add(fullname)
        return importlib.machinery.ModuleSpec(fullname, _AbsentLoader(), is_package=True)


@contextlib.contextmanager
def _absent_modules_allowed() -> Iterator[_AbsentModuleFinder]:
    finder = _AbsentModuleFinder()
    sys.meta_path.append(finder)
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)
        for name in finder.placed:
            if isinstance(sys.modules.get(name), _AbsentModule):
                del sys.modules[name]


# -- locating and describing the source


def _package_dir(path: str) -> Path:
    """The ``balrog`` package directory for ``path``: a checkout (holding ``balrog/``), the
    package directory itself, or ``installed`` (the ``balrog`` package on ``sys.path``)."""
    if path == "installed":
        spec = importlib.util.find_spec("balrog")
        if spec is None or not spec.submodule_search_locations:
            raise BalrogSourceError(
                "agent.balrog_source=installed, but no 'balrog' package is importable here; "
                "install BALROG (pip install -e <checkout>) or give the checkout's path")
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    root = Path(path).expanduser()
    if not root.exists():
        raise BalrogSourceError(f"agent.balrog_source {path!r} does not exist; give the path of "
                                "a BALROG checkout (git clone https://github.com/balrog-ai/BALROG)")
    for candidate in (root / "balrog", root):
        if (candidate / "agents").is_dir() and (candidate / "prompt_builder").is_dir():
            return candidate.resolve()
    raise BalrogSourceError(
        f"agent.balrog_source {path!r} is not a BALROG checkout: no balrog/agents and "
        "balrog/prompt_builder under it; give the directory that holds BALROG's 'balrog' package")


def describe_commit(package_dir: Path) -> str:
    """The git commit of the checkout whose top directory holds ``package_dir``
    (``<sha>-dirty`` when BALROG's files differ from it), or ``unknown`` when the package is not
    at the top of a git work tree (an installed package, or one inside another repository)."""
    try:
        top = subprocess.run(["git", "-C", str(package_dir), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        if Path(top).resolve() != package_dir.parent.resolve():
            return "unknown"
        sha = subprocess.run(["git", "-C", str(package_dir), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(package_dir), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}{DIRTY}" if dirty.strip() else sha


def text_sha256(text: str) -> str:
    """Hex SHA-256 of ``text`` (UTF-8): how results record which instruction a model got."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- the feedback statement of BALROG's evaluation loop


def _find_feedback(evaluator: Path) -> ast.stmt | None:
    """The statement of ``Evaluator.run_episode`` that assigns ``obs["text"]["long_term_context"]``
    (BALROG's invalid-action feedback), or None when that commit has none."""
    tree = ast.parse(evaluator.read_text(encoding="utf-8"), filename=str(evaluator))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "run_episode":
            for stmt in ast.walk(node):
                if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and ast.unparse(stmt.targets[0]) == FEEDBACK_TARGET):
                    return stmt
    return None


@dataclass(frozen=True)
class FeedbackStatement:
    """BALROG's own feedback statement, run on one observation.

    ``apply(obs, action, completion, config)`` executes the statement with BALROG's names bound:
    ``obs`` (the observation dict, changed in place), ``action`` (what the validity check
    returned), ``response.completion`` (the agent's answer) and ``self.config`` (the run's BALROG
    config). ``source`` is the statement's text, for the record.
    """

    code: types.CodeType
    source: str

    def apply(self, obs: dict[str, Any], action: str, completion: str, config: Any) -> None:
        """Run the statement; ``obs["text"]["long_term_context"]`` may change."""
        namespace = {"obs": obs, "action": action,
                     "response": types.SimpleNamespace(completion=completion),
                     "self": types.SimpleNamespace(config=config)}
        exec(self.code, namespace)


# -- the loaded source


class Recorder:
    """Stands in for the OpenAI SDK client inside BALROG's ``OpenAIWrapper``: records the
    keyword arguments of each ``chat.completions.create`` call (``calls``) and answers the next
    of ``completions``."""

    def __init__(self, completions: Sequence[str]) -> None:
        self.calls: list[dict[str, Any]] = []
        self._completions = iter(list(completions))
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    def _create(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        text = next(self._completions)
        return types.SimpleNamespace(
            choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=text),
                                           finish_reason="stop")],
            usage=types.SimpleNamespace(prompt_tokens=1, completion_tokens=1))


@dataclass
class _EnvStandIn:
    """What BALROG's instruction and validity code read of an env: its action names
    (``actions`` / ``language_action_space``) and its default action."""

    actions: list[str]
    language_action_space: Any
    default_action: str


class _AnyAction:
    """The action space of a free-text game: every answer is a member."""

    def __contains__(self, item: object) -> bool:
        return True


@dataclass
class BalrogSource:
    """BALROG's code and config, loaded from one checkout.

    ``package_dir``: the ``balrog`` package directory; ``commit``: its git commit (or
    ``unknown``); ``config``: ``balrog/config/config.yaml`` as an OmegaConf ``DictConfig``;
    ``feedback``: the evaluation loop's invalid-action feedback statement (None when that commit
    gives none); ``load_errors``: module -> why it would not import; ``set_aside``: inner
    modules replaced by inert ones because their module-level code failed (-> why).
    """

    package_dir: Path
    commit: str
    config: Any
    feedback: FeedbackStatement | None
    modules: dict[str, types.ModuleType] = field(default_factory=dict)
    load_errors: dict[str, str] = field(default_factory=dict)
    set_aside: dict[str, str] = field(default_factory=dict)

    def agent_class(self, agent_type: str) -> type:
        """BALROG's agent class for ``agent.type``. Raises BalrogSourceError for a type BALROG
        has not, or one this checkout lacks."""
        if agent_type not in AGENT_CLASSES:
            raise BalrogSourceError(
                f"agent.protocol=balrog plays BALROG's own agents: agent.type must be one of "
                f"{', '.join(AGENT_CLASSES)}, not {agent_type!r}")
        module_name, class_name = AGENT_CLASSES[agent_type]
        module = self.modules.get(f"agents.{module_name}")
        cls = getattr(module, class_name, None) if module is not None else None
        if cls is None:
            why = self.load_errors.get(f"agents.{module_name}", "not in this checkout")
            raise BalrogSourceError(f"BALROG at {self.package_dir} has no {class_name} "
                                    f"(balrog/agents/{module_name}.py): {why}")
        return cls

    def module(self, name: str) -> types.ModuleType:
        """The loaded module ``balrog.<name>`` (imported with the package). Raises
        BalrogSourceError when this checkout has none or it would not import."""
        module = self.modules.get(name) or sys.modules.get(f"balrog.{name}")
        if module is None or isinstance(module, _AbsentModule):
            why = self.load_errors.get(name) or self.set_aside.get(f"balrog.{name}", "missing")
            raise BalrogSourceError(f"BALROG at {self.package_dir} has no usable "
                                    f"balrog/{name.replace('.', '/')}.py: {why}")
        return module

    def create_prompt_builder(self, agent_config: Any) -> Any:
        """BALROG's own ``create_prompt_builder(config.agent)``."""
        return self.modules["prompt_builder"].create_prompt_builder(agent_config)

    def llm_response(self, **fields: Any) -> Any:
        """A BALROG ``LLMResponse`` namedtuple built from ``fields``."""
        return self.modules["client"].LLMResponse(**fields)

    def openai_client(self, config: Any, completions: Sequence[str], *,
                      base_url: str | None = None, transport: Any = None,
                      ) -> tuple[Any, Recorder]:
        """BALROG's own ``OpenAIWrapper`` for ``config.client``, its SDK client one of:

        - ``transport``: an object with ``chat.completions.create(**kwargs)`` (Moria's backend
          behind it, ``agent.protocol=balrog`` runs);
        - ``base_url``: the OpenAI SDK's own client, sending to that server (the bodies go over
          HTTP exactly as BALROG's client sends them; protocol-check's replay);
        - neither: a :class:`Recorder` answering ``completions`` in order (no network).

        With either of the first two, the wrapper retries as the checkout's config says
        (``client.max_retries``; ``client.delay`` with a transport, no wait for the replay,
        which answers at once); with the recorder it tries once. Returns the wrapper and the
        recorder (empty unless it is the client)."""
        recorder = Recorder(completions)
        max_retries, delay = 1, 0.0
        if transport is not None or base_url is not None:
            max_retries = int(config.client.get("max_retries", 5))
            delay = float(config.client.get("delay", 2)) if transport is not None else 0.0
        client_config = types.SimpleNamespace(
            client_name="openai", model_id=str(config.client.get("model_id") or ""),
            base_url=base_url, timeout=int(config.client.get("timeout", 60)),
            max_retries=max_retries, delay=delay,
            generate_kwargs=dict(config.client.get("generate_kwargs") or {}),
            alternate_roles=bool(config.client.get("alternate_roles", False)))
        client = self.modules["client"].OpenAIWrapper(client_config)
        if transport is not None:
            client.client = transport
        elif base_url is not None:
            from openai import OpenAI

            client.client = OpenAI(api_key="protocol-check", base_url=base_url, max_retries=0)
        else:
            client.client = recorder
        client._initialized = True
        return client, recorder

    def generation(self, config: Any) -> dict[str, Any]:
        """``{"temperature", "max_tokens"}`` exactly as this checkout's OpenAI client sends them
        for ``config`` (learnt by letting it build one request): ``temperature`` None when it
        sends none (older commits never send one, whatever the config says)."""
        client, recorder = self.openai_client(config, ["ok"])
        message = self.modules["prompt_builder.history"].Message(role="user", content="ok")
        client.generate([message])
        sent = recorder.calls[0]
        return {"temperature": sent.get("temperature"), "max_tokens": sent.get("max_tokens")}

    def _wrapper(self, env: str, task: str, action_names: Sequence[str],
                 default_action: str) -> Any:
        references = balrog_references()  # each family's manifest names it as BALROG does
        if env not in references:
            raise BalrogSourceError(f"agent.protocol=balrog covers BALROG's environments "
                                    f"({', '.join(references)}); {env!r} is not one of them")
        balrog_env, package = references[env].env, references[env].package
        if f"environments.{package}" in self.load_errors:
            raise BalrogSourceError(f"BALROG's {package} module would not import: "
                                    f"{self.load_errors[f'environments.{package}']}")
        space = list(action_names) if action_names else _AnyAction()
        wrapper_cls = self.modules["environments.env_wrapper"].EnvWrapper
        wrapper = wrapper_cls.__new__(wrapper_cls)
        # BALROG's methods read only these attributes (gymnasium's Wrapper.__init__ would
        # want a real env)
        wrapper.__dict__.update(env=_EnvStandIn(list(action_names), space, default_action),
                                env_name=balrog_env, task_name=task, failed_candidates=[])
        return wrapper

    def instruction(self, env: str, task: str, *, action_names: Sequence[str],
                    default_action: str, mission: str | None = None) -> str:
        """BALROG's instruction prompt for ``env``/``task``, from its own
        ``EnvWrapper.get_instruction_prompt`` (BabyAI: ``mission`` is the episode's mission).

        Raises BalrogSourceError when the env is not BALROG's or its module would not load.
        """
        wrapper = self._wrapper(env, task, action_names, default_action)
        with _absent_modules_allowed():
            return str(wrapper.get_instruction_prompt(instructions=mission))

    def validity(self, env: str, task: str, *, action_names: Sequence[str],
                 default_action: str) -> Callable[[str], str]:
        """BALROG's ``EnvWrapper.check_action_validity`` for one episode: answer -> the action
        BALROG applies (the answer itself when it is an action name exactly, else the default;
        every answer in a free-text game, whose ``action_names`` is empty)."""
        wrapper = self._wrapper(env, task, action_names, default_action)
        return wrapper.check_action_validity  # type: ignore[no-any-return]


#: How many failing inner BALROG modules one import may set aside (see ``_import``).
MAX_SET_ASIDE = 8


def _failing_inner_module(exc: BaseException, target: str) -> str | None:
    """The innermost BALROG module (other than ``target`` and its parents) whose module-level
    code raised ``exc``, or None."""
    failing = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        name = str(frame.f_globals.get("__name__", ""))
        if frame.f_code.co_name == "<module>" and name.startswith("balrog."):
            failing = name
        tb = tb.tb_next
    if failing is None or target == failing or target.startswith(failing + "."):
        return None
    return failing


def _forget(prefix: str) -> None:
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        if not isinstance(sys.modules[name], _AbsentModule):
            del sys.modules[name]


def _import(name: str, source: BalrogSource) -> None:
    """Import ``balrog.<name>`` into ``source.modules``. A BALROG module it imports whose own
    module-level code fails (BALROG's NLE image renderer measures fonts with the installed
    Pillow, for one) is set aside as an inert module and the import retried; what was set
    aside is listed in ``source.set_aside``. A failure of the module itself goes to
    ``source.load_errors``."""
    target = f"balrog.{name}"
    for _ in range(MAX_SET_ASIDE + 1):
        try:
            source.modules[name] = importlib.import_module(target)
            return
        except Exception as exc:  # noqa: BLE001 - reported per module, used only when needed
            inner = _failing_inner_module(exc, target)
            if inner is None:
                source.load_errors[name] = f"{type(exc).__name__}: {exc}"
                return
            _forget(target)
            _forget(inner)
            sys.modules[inner] = _AbsentModule(inner)
            source.set_aside[inner] = f"{type(exc).__name__}: {exc}"
    source.load_errors[name] = f"more than {MAX_SET_ASIDE} inner modules failed to import"


def _install_package(package_dir: Path) -> None:
    """Register ``package_dir`` as the ``balrog`` package (without putting the checkout's other
    top-level files on ``sys.path``)."""
    existing = sys.modules.get("balrog")
    if existing is not None:
        where = Path(next(iter(getattr(existing, "__path__", [""])), "")).resolve()
        if where != package_dir:
            raise BalrogSourceError(
                f"this process already loaded BALROG from {where}; one BALROG source per "
                f"process (asked for {package_dir})")
        return
    spec = importlib.util.spec_from_file_location(
        "balrog", package_dir / "__init__.py", submodule_search_locations=[str(package_dir)])
    if spec is None or spec.loader is None:
        raise BalrogSourceError(f"cannot import BALROG's package at {package_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["balrog"] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules["balrog"]
        raise


def _load_config(package_dir: Path) -> Any:
    from omegaconf import OmegaConf

    path = package_dir / "config" / "config.yaml"
    if not path.is_file():
        raise BalrogSourceError(f"BALROG at {package_dir} has no config/config.yaml")
    return OmegaConf.load(path)


def load_balrog_source(path: str) -> BalrogSource:
    """Load BALROG's code from ``path`` (a checkout, its ``balrog`` package directory, or
    ``installed``), once per process.

    Raises:
        BalrogSourceError: ``path`` is missing or not BALROG, another BALROG is loaded already,
            or the prompt builder / config cannot be read.
    """
    if not path:
        raise BalrogSourceError(
            "agent.protocol=balrog needs agent.balrog_source: the path of a BALROG checkout "
            "(git clone https://github.com/balrog-ai/BALROG; any commit from 2024-11 on) or "
            "'installed' for a pip-installed balrog package")
    package_dir = _package_dir(path)
    with _LOCK:
        if package_dir in _LOADED:
            return _LOADED[package_dir]
        config = _load_config(package_dir)
        evaluator = package_dir / "evaluator.py"
        statement = _find_feedback(evaluator) if evaluator.is_file() else None
        feedback = None if statement is None else FeedbackStatement(
            compile(ast.Module(body=[statement], type_ignores=[]), str(evaluator), "exec"),
            ast.unparse(statement))
        source = BalrogSource(package_dir, describe_commit(package_dir), config, feedback)
        with _absent_modules_allowed():
            _install_package(package_dir)
            for name in ("client", "prompt_builder", "prompt_builder.history", "agents.base",
                         *(f"agents.{m}" for m, _ in AGENT_CLASSES.values()),
                         "environments.env_wrapper",
                         *(f"environments.{r.package}" for r in balrog_references().values())):
                _import(name, source)
        for required in ("client", "prompt_builder", "environments.env_wrapper"):
            if required in source.load_errors:
                raise BalrogSourceError(f"BALROG's balrog/{required.replace('.', '/')} would not "
                                        f"import from {package_dir}: "
                                        f"{source.load_errors[required]}")
        _LOADED[package_dir] = source
        return source


# -- what both the policy server and protocol-check build from a source ----------------------

#: Spec fields of ``agent`` that override the checkout's ``agent`` section when set explicitly.
AGENT_OVERRIDES: tuple[str, ...] = (
    "max_text_history", "max_image_history", "max_cot_history", "remember_cot", "max_icl_history",
)
#: Fields of ``client.generate_kwargs`` that override the checkout's when set explicitly.
GENERATION_OVERRIDES: tuple[str, ...] = ("temperature", "max_tokens")


class PngFrame:
    """An observation image in the form BALROG's code handles: an object with
    ``save(fp, format="PNG")`` (as a PIL image has); holds the PNG bytes unchanged."""

    def __init__(self, png: bytes) -> None:
        self.png = png

    def save(self, fp: Any, format: str | None = None, **_: Any) -> None:
        """Write the PNG bytes to the file object ``fp`` (``format`` must be PNG or None)."""
        if format not in (None, "PNG", "png"):
            raise ValueError(f"PngFrame holds a PNG, cannot save as {format!r}")
        fp.write(self.png)


def effective_config(source: BalrogSource, agent: AgentConfig, client: ClientConfig) -> Any:
    """The checkout's config with the run spec's explicit values applied (an OmegaConf copy):
    the ``agent`` fields of ``AGENT_OVERRIDES`` and the ``generate_kwargs`` of
    ``GENERATION_OVERRIDES`` that the spec set (``model_fields_set``), the agent type, and
    always the spec's model."""
    from omegaconf import OmegaConf

    config: Any = OmegaConf.create(OmegaConf.to_container(source.config, resolve=True))
    agent_set = agent.model_fields_set
    for name in AGENT_OVERRIDES:
        if name in agent_set:
            OmegaConf.update(config, f"agent.{name}", getattr(agent, name), force_add=True)
    OmegaConf.update(config, "agent.type", agent.type, force_add=True)
    # the model is always the run spec's
    OmegaConf.update(config, "client.model_id", client.model_id, force_add=True)
    kwargs = client.generate_kwargs
    for name in GENERATION_OVERRIDES:
        if name in kwargs.model_fields_set:
            OmegaConf.update(config, f"client.generate_kwargs.{name}", getattr(kwargs, name),
                             force_add=True)
    return config


def build_agent(source: BalrogSource, config: Any, agent_type: str, client: Any) -> Any:
    """BALROG's agent of ``agent_type`` over ``client`` (anything with BALROG's
    ``generate(messages)``), with BALROG's own prompt builder for ``config.agent``, constructed
    the way BALROG's ``AgentFactory`` constructs each type."""
    cls = source.agent_class(agent_type)
    builder = source.create_prompt_builder(config.agent)
    def factory() -> Any:
        return client
    if agent_type in ("cot", "robust_cot"):
        return cls(factory, builder, config=config)
    if agent_type == "few_shot":
        return cls(factory, builder, config.agent.max_icl_history)
    return cls(factory, builder)
