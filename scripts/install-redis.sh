#!/usr/bin/env bash
# Installs Debian's Redis server for the object-storage tests (JuiceFS keeps a volume's metadata in it, as a
# fleet's machines share it in production), once.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
redis-server --version
