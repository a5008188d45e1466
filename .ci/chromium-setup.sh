#!/usr/bin/env bash
# Install Debian's chromium for the explorer's browser test (tests/integration/test_workflow.py opens the smoke
# run's explorer headless). Idempotent: exits 0 at once when a chromium is on PATH. Quiet: one line, or apt's errors.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "chromium-setup: chromium already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "chromium-setup: not root and no sudo; install it with: apt-get install chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null; }
echo "chromium-setup: installed $(chromium --version 2>/dev/null || echo chromium)"
