#!/usr/bin/env bash
# Fresh Debian 12 machine -> built ecoserve: installs packages, builds ./build/ecoserve.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/install_deps.sh"
bash "$here/build.sh"
echo "[ecoserve] built ./build/ecoserve"
