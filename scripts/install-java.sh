#!/usr/bin/env bash
# Installs Debian's Java 17 runtime for the Spark engine (pyspark starts its JVM with it), once.
set -euo pipefail
if command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then exit 0; fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Debian 12 ships 17; a release without it ships 21, which pyspark runs on as well
$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null || $SUDO apt-get install -y -qq openjdk-21-jre-headless >/dev/null
java -version
