"""``agent.protocol=balrog``: one episode played by BALROG's own agent code.

Each turn follows BALROG's evaluation loop (``Evaluator.run_episode``): the observation goes to
BALROG's agent (``act(obs, prev_action)``) with the previous answer as ``prev_action``; the agent
builds the chat with BALROG's prompt builder, appends its own answer rule to the last user message
and extracts the answer with its own rule; BALROG's ``check_action_validity`` decides which action
BALROG would apply; when that is not the answer, BALROG's feedback statement rewrites the *next*
observation's long-term text (so the feedback stays in the history, as in BALROG). The answer
itself goes to Moria's env, which applies it under the same exact-match rule.

Moria's part is the bridge: observations in BALROG's dict form, and the model call. With an
OpenAI-compatible backend (OpenAI, OpenRouter, vLLM and llama.cpp servers) the call is BALROG's
own: the checkout's ``OpenAIWrapper.generate`` builds the request (its message form, every
content a list of parts; its keyword arguments, turned into the body by the OpenAI SDK as for
BALROG) and handles the response (its own checks and retries, e.g. on empty content where the
checkout has them), its SDK client answered by Moria's backend (``_CreateTransport``). A call
BALROG's client gives up on ends the episode as an agent error, naming it. With another backend
(Anthropic, Gemini, the local model) BALROG's ``Message`` list is turned into that provider's
request (roles, text, one PNG per attachment) and the completion returned as BALROG's
``LLMResponse``, stripped as BALROG's clients do. Settings come from the checkout's
``config/config.yaml`` (``agent`` windows, ``client.generate_kwargs``,
``eval.feedback_on_invalid_action``); a value the run spec sets explicitly wins and is recorded.
The temperature and output-token limit sent are what the checkout's own OpenAI client sends
for that config (``BalrogSource.generation``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import time
import types
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, ClassVar

from agent_server.backends import image_input_problem
from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
)
from agent_server.strategies.base import Strategy
from agent_server.strategies.llm import prompt_json
from agent_server.turn import Decision, EpisodeContext, TurnInput
from moria.balrog_source import (
    BalrogSource,
    PngFrame,
    build_agent,
    effective_config,
    load_balrog_source,
    text_sha256,
)

#: One ``create_as_sent`` call: the SDK's response object and its Completion.
CreateCall = Coroutine[Any, Any, tuple[Any, Completion]]


class _CreateTransport:
    """The OpenAI SDK client that BALROG's ``OpenAIWrapper`` calls
    (``client.chat.completions.create(**kwargs)``), answered by Moria's backend
    (``create_as_sent``) on the event loop. Called from the worker thread BALROG's agent runs
    in. Keeps the ``Completion`` of every call (``calls``)."""

    def __init__(self, create: Callable[[dict[str, Any]], CreateCall],
                 loop: asyncio.AbstractEventLoop) -> None:
        self._create_as_sent = create
        self._loop = loop
        self.calls: list[Completion] = []
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    def _create(self, **kwargs: Any) -> Any:
        future: Future[tuple[Any, Completion]] = asyncio.run_coroutine_threadsafe(
            self._create_as_sent(kwargs), self._loop)
        response, completion = future.result()
        self.calls.append(completion)
        return response


class _BridgeClient:
    """BALROG's client interface (``generate(messages)``) over a Moria backend, called from the
    worker thread BALROG's agent runs in; the model call itself runs on the event loop. With a
    backend that can ``create_as_sent``, the checkout's own ``OpenAIWrapper`` makes the call
    (module docstring); ``last`` is then the calls of one ``generate`` as one ``Completion``
    (usage and latency summed, the last text and stop reason, every attempt counted)."""

    def __init__(self, source: BalrogSource, backend: Backend, params: GenerateParams,
                 model_id: str, loop: asyncio.AbstractEventLoop, record_prompts: bool,
                 config: Any) -> None:
        self._source = source
        self._backend = backend
        self._params = params
        self._model_id = model_id
        self._loop = loop
        self._record_prompts = record_prompts
        self.last: Any = None
        self.last_prompt = ""
        self._transport = (_CreateTransport(backend.create_as_sent, loop)
                           if backend.can_create_as_sent() else None)
        self._wrapper = (source.openai_client(config, [], transport=self._transport)[0]
                         if self._transport is not None else None)

    def generate(self, messages: list[Any]) -> Any:
        """One model call for BALROG's ``messages``; returns BALROG's ``LLMResponse``. Raises
        BackendError when the model call failed for good, or BALROG's client gave up."""
        chat = [ChatMessage(role=m.role, content=m.content,
                            images=[] if m.attachment is None else [_png(m.attachment)])
                for m in messages]
        self.last_prompt = prompt_json(chat) if self._record_prompts else ""
        if self._wrapper is not None and self._transport is not None:
            return self._generate_as_balrog(messages, self._wrapper, self._transport)
        future = asyncio.run_coroutine_threadsafe(self._backend.complete(chat, self._params),
                                                  self._loop)
        completion = future.result()
        self.last = completion
        return self._source.llm_response(
            model_id=self._model_id, completion=completion.text.strip(),
            stop_reason=completion.stop_reason, input_tokens=completion.usage.input_tokens,
            output_tokens=completion.usage.output_tokens, reasoning=None)


    def _generate_as_balrog(self, messages: list[Any], wrapper: Any,
                            transport: _CreateTransport) -> Any:
        first = len(transport.calls)
        try:
            response = wrapper.generate(messages)
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001  (BALROG's client gave up: an agent error)
            raise BackendError(f"BALROG's client gave up: {type(exc).__name__}: "
                               f"{str(exc)[:500]}", provider=self._backend.name) from None
        finally:
            self.last = _combined(transport.calls[first:])
        return response


def _combined(calls: list[Completion]) -> Completion | None:
    """The calls of one ``generate`` as one Completion: the last one's text, reasoning and
    stop reason, their usage and latency summed, every attempt counted."""
    if not calls:
        return None
    usage = TokenUsage()
    for call in calls:
        usage.add(call.usage)
    last = calls[-1]
    return dataclasses.replace(last, usage=usage, latency_s=sum(c.latency_s for c in calls),
                               attempts=sum(max(1, c.attempts) for c in calls))


def _png(attachment: Any) -> bytes:
    if isinstance(attachment, PngFrame):
        return attachment.png
    buffer = io.BytesIO()
    attachment.save(buffer, format="PNG")
    return buffer.getvalue()


class BalrogProtocolStrategy(Strategy):
    """One episode under BALROG's protocol (see the module docstring).

    Raises (at construction, so the Begin is refused before any turn):
        BalrogSourceError: ``agent.balrog_source`` is missing or unusable, the agent type or env
            is not BALROG's.
        ValueError: no backend, or images asked of a client that takes none.
    """

    name: ClassVar[str] = "balrog"
    calls_model = True
    reads_tensors = False
    keeps_images = True

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        if backend is None:
            raise ValueError(f"agent.protocol=balrog with {ctx.agent.type!r} needs a model backend")
        super().__init__(ctx, backend)
        self.source = load_balrog_source(ctx.agent.balrog_source or "")
        self.config = effective_config(self.source, ctx.agent, ctx.client)
        problem = image_input_problem(ctx.client, int(self.config.agent.max_image_history))
        if problem:
            raise ValueError(problem)
        self.source.agent_class(ctx.agent.type)  # a type this commit lacks: refused at Begin
        self.generation = self.source.generation(self.config)
        self._params = GenerateParams(temperature=self.generation["temperature"],
                                      max_tokens=self.generation["max_tokens"],
                                      extra=dict(ctx.client.generate_kwargs.model_extra or {}))
        self._backend: Backend = backend
        self._agent: Any = None
        self._client: _BridgeClient | None = None
        self._check = self.source.validity(ctx.env_name, ctx.task, action_names=ctx.action_names,
                                           default_action=ctx.default_action)
        self.instruction = self.source.instruction(
            ctx.env_name, ctx.task, action_names=ctx.action_names,
            default_action=ctx.default_action, mission=ctx.first_info.get("mission"))
        self._prev_answer: str | None = None
        self._prev_applied: str | None = None

    @property
    def uses_images(self) -> bool:
        """True when BALROG's config keeps images in the history."""
        return int(self.config.agent.max_image_history) > 0

    def protocol(self) -> dict[str, Any]:
        """What results record of this episode's protocol."""
        return {"name": "balrog", "balrog_commit": self.source.commit,
                "balrog_source": str(self.source.package_dir.parent),
                "instruction_sha256": text_sha256(self.instruction),
                "generation": dict(self.generation),
                "feedback_statement": bool(self.source.feedback),
                "set_aside": sorted(self.source.set_aside)}

    def _start(self) -> None:
        self._client = _BridgeClient(self.source, self._backend, self._params,
                                     self.ctx.client.model_id or "", asyncio.get_running_loop(),
                                     self.ctx.record_prompts, self.config)
        self._agent = build_agent(self.source, self.config, self.ctx.agent.type, self._client)
        self._agent.reset()
        self._agent.prompt_builder.update_instruction_prompt(self.instruction)
        if self.ctx.agent.type == "few_shot":
            self._load_demonstrations()

    def _load_demonstrations(self) -> None:
        for demo in self.ctx.demonstrations:
            for step in demo.steps:
                observation = {"text": {"long_term_context": step.observation}}
                self._agent.update_icl_observation(observation)
                self._agent.update_icl_action(step.action)
            self._agent.wrap_episode()

    def observation(self, turn: TurnInput) -> dict[str, Any]:
        """``turn`` in BALROG's observation form, with BALROG's feedback statement applied when
        BALROG's validity check replaced the previous answer."""
        obs: dict[str, Any] = {
            "text": {"long_term_context": turn.long_term_context,
                     "short_term_context": turn.short_term_context},
            "image": PngFrame(turn.image_png) if turn.image_png is not None else None,
        }
        if (self.source.feedback is not None and self._prev_answer is not None
                and self._prev_applied is not None):
            self.source.feedback.apply(obs, self._prev_applied, self._prev_answer, self.config)
        return obs

    async def act(self, turn: TurnInput) -> Decision:
        """Ask BALROG's agent for ``turn``'s answer (see the module docstring).

        Raises BackendError when the model call failed for good."""
        if self._agent is None:
            self._start()
        assert self._client is not None
        obs = self.observation(turn)
        started = time.perf_counter()
        response = await asyncio.to_thread(self._agent.act, obs, prev_action=self._prev_answer)
        answer = str(response.completion)
        self._prev_answer = answer
        self._prev_applied = str(self._check(answer))
        completion = self._client.last
        return Decision(
            action=answer,
            raw_completion=completion.text if completion is not None else "",
            reasoning=str(getattr(response, "reasoning", "") or ""),
            usage=completion.usage if completion is not None else TokenUsage(),
            latency_s=completion.latency_s if completion is not None
            else time.perf_counter() - started,
            stop_reason=completion.stop_reason if completion is not None else "",
            attempts=completion.attempts if completion is not None else 0,
            prompt_json=self._client.last_prompt,
        )
