#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need that Rust does not bring,
# then runs every test of the workspace.
#
# The web page test (crates/server/tests/web_page.rs) drives headless Chromium: Debian's
# `chromium` package is installed when it is missing (as root, or through sudo). The store
# tests (crates/store/tests/) start a PostgreSQL server of their own from the binaries in
# /usr/lib/postgresql/*/bin: Debian's `postgresql` package is installed when they are missing
# (without the cluster and service it would set up: the tests need only the binaries).
set -euo pipefail
cd "$(dirname "$0")/.."

apt_get() {
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo DEBIAN_FRONTEND=noninteractive apt-get "$@"
  else
    echo "cannot run apt-get $*: neither root nor sudo is available" >&2
    exit 1
  fi
}
updated=
install() {
  [ -n "$updated" ] || apt_get update -q
  updated=1
  apt_get install -y -q "$@"
}

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (Debian package) for the web page test"
  install chromium
fi

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "== installing postgresql (Debian package) for the store tests"
  # postgresql-common first, told to create no cluster (so no server is started either).
  install postgresql-common
  conf=/etc/postgresql-common/createcluster.conf
  sed_i() { if [ "$(id -u)" -eq 0 ]; then sed -i "$@"; else sudo sed -i "$@"; fi; }
  if grep -q '^#* *create_main_cluster' "$conf"; then
    sed_i 's/^#* *create_main_cluster.*/create_main_cluster = false/' "$conf"
  else
    echo "create_main_cluster = false" | { if [ "$(id -u)" -eq 0 ]; then tee -a "$conf"; else sudo tee -a "$conf"; fi; } >/dev/null
  fi
  install postgresql
fi

cargo test --workspace --locked "$@"
