#!/usr/bin/env bash
# Install what the molecule scenarios need on the host: rootful podman, runc
# and debootstrap (the test image is built locally, no registry is reachable).
# Idempotent: packages already installed are left alone, and apt is not even
# called when nothing is missing. Nothing under /etc is edited; podman's
# settings come from tools/containers/containers.conf via CONTAINERS_CONF.
#
# Usage: tools/containers/setup-podman.sh        (as root, Debian/Ubuntu host)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
packages=(podman runc debootstrap)

if [[ ${EUID} -ne 0 ]]; then
    echo "setup-podman.sh: run as root (rootful podman and apt-get need it)" >&2
    exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)"
    if [[ ${status} != "installed" ]]; then
        missing+=("${pkg}")
    fi
done

if ((${#missing[@]} > 0)); then
    echo "setup-podman.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "setup-podman.sh: ${packages[*]} already installed"
fi

# env.sh is checked on its own (shellcheck does not follow sources without -x).
# shellcheck disable=SC1091
. "${here}/env.sh"
# Prove the configuration works here: podman must parse our containers.conf
# and report the runtime it selects.
runtime="$(podman info --format '{{.Host.OCIRuntime.Name}}')"
if [[ ${runtime} != "runc" ]]; then
    echo "setup-podman.sh: podman selected runtime '${runtime}', expected runc from ${CONTAINERS_CONF}" >&2
    exit 1
fi
echo "setup-podman.sh: podman $(podman version --format '{{.Client.Version}}') ready (runtime ${runtime}, CONTAINERS_CONF=${CONTAINERS_CONF})"
