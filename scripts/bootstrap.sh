#!/usr/bin/env bash
# Sets up everything xla_teach needs on a fresh Debian/Ubuntu machine:
# a virtual environment in .venv with the package (editable) and its test/doc extras,
# Graphviz's `dot` (through apt) for rendering HLO graphs, and Chromium with its chromedriver for
# the browser tests of the pages people look at (XLA_TEACH_BROWSER_TESTS=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

apt_packages=()
command -v dot >/dev/null 2>&1 || apt_packages+=(graphviz)
if [ "${XLA_TEACH_BROWSER_TESTS:-1}" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || apt_packages+=(chromium-driver)  # selenium drives the explorer tests
fi
if [ ${#apt_packages[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[bootstrap] installing with apt: ${apt_packages[*]}"
  as_root apt-get update -qq || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null \
    || echo "[bootstrap] warning: apt could not install ${apt_packages[*]}; graph rendering/browser tests will skip"
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test,mpi]"
touch .venv/.installed-stamp
echo "[bootstrap] ready: $(.venv/bin/python --version), $(command -v dot || echo 'no dot')"
