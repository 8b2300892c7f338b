#!/usr/bin/env bash
# Print the Python interpreter that can run moto's server (moto 5 with its
# server extras flask and flask_cors), the real executable rather than a
# pyenv shim, so a process started with it is the server itself (its pid is
# the one to stop). Tried in turn: $MOTO_PYTHON, python3 on PATH, the pyenv
# versions under ~/.pyenv and /root/.pyenv (newest first), /usr/bin/python3.
# Exit 1 with a message saying what is missing when none has it. It needs no
# root and installs nothing (PyPI is not reachable here; the machine image
# ships moto 5.2.1 for pyenv's Python 3.11).
set -uo pipefail
cands=()
[ -n "${MOTO_PYTHON:-}" ] && cands+=("$MOTO_PYTHON")
command -v python3 >/dev/null 2>&1 && cands+=(python3)
for d in "${HOME:-/root}/.pyenv/versions" /root/.pyenv/versions; do
  [ -d "$d" ] || continue
  for p in $(ls -1d "$d"/*/bin/python3 2>/dev/null | sort -rV); do cands+=("$p"); done
done
cands+=(/usr/bin/python3)
for p in "${cands[@]}"; do
  exe="$("$p" -c 'import moto, flask, flask_cors, sys; print(sys.executable)' 2>/dev/null)" || continue
  [ -n "$exe" ] && [ -x "$exe" ] && { echo "$exe"; exit 0; }
done
echo "no Python here can run moto's server (tried: ${cands[*]}): install moto with its server extras (pip install 'moto[server]') for one of them, or set MOTO_PYTHON" >&2
exit 1
