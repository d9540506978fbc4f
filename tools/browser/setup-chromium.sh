#!/usr/bin/env bash
# Install what the browser test of the campaign's HTML page needs on the host: Debian's
# chromium package (headless; no browser is downloaded from anywhere else). Idempotent: when
# chromium is installed, apt is not even called. Waits for apt's lock rather than failing when
# another setup (tools/containers/setup-podman.sh) holds it.
#
# Usage: tools/browser/setup-chromium.sh        (as root, Debian/Ubuntu host)
set -euo pipefail

packages=(chromium)

missing=()
for pkg in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)"
    if [[ ${status} != "installed" ]]; then
        missing+=("${pkg}")
    fi
done

if ((${#missing[@]} > 0)); then
    if [[ ${EUID} -ne 0 ]]; then
        echo "setup-chromium.sh: ${missing[*]} missing; run as root (apt-get needs it)" >&2
        exit 1
    fi
    echo "setup-chromium.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -q
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
else
    echo "setup-chromium.sh: ${packages[*]} already installed"
fi

# Prove it runs here, headless, as this user.
version="$(chromium --headless --no-sandbox --version 2>/dev/null || true)"
if [[ -z ${version} ]]; then
    echo "setup-chromium.sh: chromium is installed but 'chromium --version' printed nothing" >&2
    exit 1
fi
echo "setup-chromium.sh: ${version} ready"
