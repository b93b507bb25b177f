#!/usr/bin/env bash
# Creates the verifiers environment (default ./.venv-verifiers; another path in $1) and installs the project
# into it with the verifiers extra, for `vf.load_environment("memsearchqa")` and tests/on_verifiers. It is
# separate from the main environment: verifiers 0.3.1, the last release with MultiTurnEnv (0.4.0 keeps only
# its v1 API), needs mcp < 2, and the engine extras' vllm(-cpu) 0.32.0 needs mcp >= 2. No torch: the
# environment and the scripted agents need none.
# Then: "$VENV"/bin/python -m pytest tests/on_verifiers
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-verifiers}"
[ -x "$venv/bin/python" ] || python -m venv "$venv"
"$venv/bin/python" -m pip install -q -e ".[dev,verifiers]"
"$venv/bin/python" -c "import verifiers, memsearchqa; print('verifiers', verifiers.__version__, 'in', '$venv')"
