#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need that Rust does not bring,
# then runs every test of the workspace.
#
# The web page test (crates/server/tests/web_page.rs) drives headless Chromium: Debian's
# `chromium` package is installed when it is missing (as root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (Debian package) for the web page test"
  if [ "$(id -u)" -eq 0 ]; then
    apt_get() { DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
  elif command -v sudo >/dev/null 2>&1; then
    apt_get() { sudo DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
  else
    echo "chromium is missing and neither root nor sudo is available to install it" >&2
    exit 1
  fi
  apt_get update -q
  apt_get install -y -q chromium
fi

cargo test --workspace --locked "$@"
