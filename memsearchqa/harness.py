"""The env's own step loop as the verifiers v1 harness.

MemSearchQA's agent is the env's loop: each model turn is one ``env.step``, and the next prompt is the
env's observation in its view, which in the memory view is not the last prompt extended. No bundled
harness can build those prompts (they extend their own conversation, or compact it by summary), so the
loop runs here, in process: verifiers allows that for a harness whose every model call goes through
the rollout's interception endpoint (``Harness.launch``), which records each call into the trace. A
prompt that extends the previous call's stays on its branch; one that does not starts a new branch,
a training sample of its own (as after the ``bash`` harness's compaction). So the full view is one
branch, and the memory view one branch per turn, except that turn 2's prompt extends turn 1's (both
are the whole history so far) and shares its branch.

The loop asks the model until verifiers refuses a call: the task's ``@vf.stop`` once the env has
ended the episode, or verifiers' own limits (``max_turns``, ...). An episode verifiers stops first, or
a rollout that fails or times out mid-episode, ends unanswered (``env.truncate()``, score 0), as the
env's turn budget ends one. Searches go to the taskset's MCP search server (``memsearchqa.search``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import verifiers.v1 as vf

from mempo_env import MemSearchQAEnv
from memsearchqa.search import SERVER, McpSearch
from memsearchqa.taskset import EpisodeState, MemSearchQAData, episode_envs


class MemSearchQAHarness(vf.Harness[vf.HarnessConfig]):
    """See the module docstring."""

    SUPPORTS_MCP = True
    EXECUTES_CODE = False  # the model runs nothing: its turns are text the env parses
    NEEDS_CONTAINER = False

    async def launch(self, ctx: vf.ModelContext, trace: vf.Trace, runtime: vf.Runtime, endpoint: str,
                     secret: str, mcp_urls: dict[str, str], data: vf.TaskData) -> vf.ProgramResult:
        if not isinstance(data, MemSearchQAData):
            raise TypeError(f"the memsearchqa harness plays memsearchqa tasks, not {type(data).__name__}")
        if data.system_prompt is not None:
            raise ValueError("the env's prompt template is the system prompt; choose it with the taskset's `prompt`")
        state: EpisodeState = trace.state
        search = McpSearch(mcp_urls[SERVER], self.config.tool_timeout, asyncio.get_running_loop())
        env = episode_envs(data.settings)(retriever=search)
        observation, _ = env.reset(seed=data.seed)  # before any connection: a refused reset leaves none open
        # No retries here: a failed call fails the rollout, which verifiers' own retries rerun whole.
        client = openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0)
        step: asyncio.Future[Any] | None = None
        try:
            while True:
                try:
                    reply = await client.chat.completions.create(model=ctx.model, messages=observation)
                except openai.BadRequestError:
                    if trace.stop_condition is not None:  # refused: the episode is over, or verifiers stopped it
                        break
                    raise
                text = reply.choices[0].message.content or ""
                # A worker thread (a search waits on the server); shielded so a cancelled rollout (verifiers'
                # timeout) leaves the step to finish before the episode is closed below.
                step = asyncio.ensure_future(asyncio.to_thread(env.step, text))
                observation, _, terminated, truncated, info = await asyncio.shield(step)
                if terminated or truncated:
                    state.end(info, by_env=True)
        finally:
            await _close(env, step, state, search, client)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


async def _close(env: MemSearchQAEnv, step: asyncio.Future[Any] | None, state: EpisodeState, search: McpSearch,
                 client: openai.AsyncOpenAI) -> None:
    """Ends an episode still open unanswered (once its last step has finished) and releases the rollout's
    env and connections."""
    if step is not None and not step.done():
        await asyncio.wait([step])
    if not state.final:
        state.end(env.truncate(), by_env=False)
    env.close()
    await search.aclose()
    await client.close()


class MemSearchQAEnvConfig(vf.SingleAgentEnvConfig):
    """verifiers' single-agent config with the agent on the host by default (``--env.agent.runtime.*``
    still places it): the harness runs in the eval process and executes nothing, so a sandbox per
    rollout (verifiers' default runtime, Prime's) would only add a boot and a login."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class MemSearchQAVerifiersEnv(vf.Env[MemSearchQAEnvConfig]):
    """verifiers' single-agent episode (``SingleAgentEnv``: one agent plays the task) on that config."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)
