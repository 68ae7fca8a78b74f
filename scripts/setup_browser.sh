#!/usr/bin/env bash
# Installs Debian's chromium if missing: the report's test renders the page in a real headless
# browser. Idempotent; needs root only when chromium is missing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "browser: chromium already installed"
  exit 0
fi
echo "browser: installing Debian's chromium (renders the run report in tests)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
