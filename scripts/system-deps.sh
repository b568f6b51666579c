#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks use, when missing:
# redis-server (Redis frontier), chromium (status page and report tests), nginx (bench), wget (WARC interop),
# gcc (mypyc compiles the hot path at install: setup.py).
# Needs root (or sudo) and apt; does nothing when everything is there.
set -euo pipefail
missing=()
for cmd_pkg in redis-server:redis-server chromium:chromium nginx:nginx wget:wget gcc:gcc; do
  cmd=${cmd_pkg%%:*}; pkg=${cmd_pkg#*:}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
