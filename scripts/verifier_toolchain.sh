#!/bin/bash
# The verifier toolchain (docs/tasks.md, "verifier tooling"): what Harbor verifiers commonly install from
# the network in their images, provided once on the host so that sandboxed verifiers run offline.
#   pytest: Debian's python3-pytest, for the host's /usr/bin/python3 (every sandbox binds /usr read-only)
#   python: hrbench binds a folder with `python -> /usr/bin/python3` at /opt/hrbench-verifier/bin (first on
#           the verifier's PATH); nothing to install for it.
# Run as root; idempotent. setup.sh calls it.
set -euo pipefail
if /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  echo "verifier toolchain: pytest $(/usr/bin/python3 -c 'import pytest; print(pytest.__version__)') present"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3-pytest
/usr/bin/python3 -c 'import pytest; print("verifier toolchain: pytest", pytest.__version__)'
