#!/usr/bin/env bash
# Build the molecule test image localhost/sglang-lab-debian:bookworm from
# Debian's own packages (no container registry is reachable on the dev/CI
# machines): debootstrap a minimal Debian 12 root file system, then
# `podman import` it.
#
# Cached: the image carries a label with the sha256 of this script (which
# holds the package list, suite and variant) and the mirror. When an image with
# that label value exists the build is skipped; change anything and it is
# rebuilt. FORCE=1 rebuilds regardless.
#
# Usage: tools/containers/build-image.sh          (as root; setup-podman.sh first)
# Env:   DEBIAN_MIRROR (default http://deb.debian.org/debian), FORCE=1,
#        SGLANG_LAB_TEST_IMAGE (default localhost/sglang-lab-debian:bookworm)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# env.sh is checked on its own (shellcheck does not follow sources without -x).
# shellcheck disable=SC1091
. "${here}/env.sh"

image="${SGLANG_LAB_TEST_IMAGE}"
suite="bookworm"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
label="org.sglang-lab.build-hash"
# What goes into the image, and why:
#   python3, python3-apt      Ansible's modules and its apt module
#   python3-venv              the ml_env role's venv (Debian 12: Python 3.11)
#   sudo, procps, iproute2    become, ps/pgrep, ip: what a real node has
#   ca-certificates           HTTPS to PyPI (the host's CA bundle is also mounted)
#   patch                     the flashinfer role applies/reverts unified diffs
#   rsync                     the model_cache role's local/rsync sources
#   gpg, gpg-agent, apt-utils test-only: sign the stand-in CUDA apt repository
#                             (apt-ftparchive + gpg) in molecule's prepare
packages="python3,python3-apt,python3-venv,sudo,procps,iproute2,ca-certificates,patch,rsync,gpg,gpg-agent,apt-utils"

build_hash="$(
    {
        sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1
        echo "${mirror}"
    } | sha256sum | cut -d' ' -f1
)"

if [[ ${FORCE:-0} != 1 ]] && podman image exists "${image}"; then
    have="$(podman image inspect --format "{{ index .Labels \"${label}\" }}" "${image}" 2>/dev/null || true)"
    if [[ ${have} == "${build_hash}" ]]; then
        echo "build-image.sh: ${image} is up to date (${label}=${build_hash:0:12}), not rebuilt"
        exit 0
    fi
    echo "build-image.sh: ${image} has ${label}='${have:0:12}', want '${build_hash:0:12}': rebuilding"
fi

for tool in debootstrap podman; do
    command -v "${tool}" >/dev/null || {
        echo "build-image.sh: ${tool} not found; run tools/containers/setup-podman.sh first" >&2
        exit 1
    }
done

workdir="$(mktemp -d /var/tmp/sglang-lab-rootfs.XXXXXX)"
cleanup() { rm -rf --one-file-system "${workdir}"; }
trap cleanup EXIT
rootfs="${workdir}/rootfs"

start=${SECONDS}
echo "build-image.sh: debootstrap ${suite} from ${mirror} into ${rootfs}"
debootstrap --variant=minbase --include="${packages}" "${suite}" "${rootfs}" "${mirror}" \
    >"${workdir}/debootstrap.log" 2>&1 || {
    tail -n 40 "${workdir}/debootstrap.log" >&2
    echo "build-image.sh: debootstrap failed (full log above, last 40 lines)" >&2
    exit 1
}
# Package lists in the image, as on any real node: Ansible's apt module
# refreshes them itself once they are older than its cache_valid_time, and
# check mode (which never refreshes) still finds packages. Downloaded .debs
# are not needed.
cp /etc/resolv.conf "${rootfs}/etc/resolv.conf"
chroot "${rootfs}" apt-get update -q >>"${workdir}/debootstrap.log" 2>&1 || {
    tail -n 20 "${workdir}/debootstrap.log" >&2
    echo "build-image.sh: apt-get update in the new root file system failed" >&2
    exit 1
}
rm -f "${rootfs}/etc/resolv.conf" "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/cache/apt/*.bin \
    "${rootfs}"/var/lib/apt/lists/*_Translation-*
echo "build-image.sh: debootstrap done in $((SECONDS - start)) s"

old_id="$(podman image inspect --format '{{.Id}}' "${image}" 2>/dev/null || true)"
start=${SECONDS}
tar -C "${rootfs}" --numeric-owner -c . |
    podman import --quiet \
        --change "LABEL ${label}=${build_hash}" \
        --change "LABEL org.sglang-lab.packages=${packages}" \
        --change 'CMD ["/bin/bash"]' \
        - "${image}" >/dev/null
if [[ -n ${old_id} ]]; then
    # The previous build, now untagged; kept if a container still uses it.
    podman rmi "${old_id}" >/dev/null 2>&1 || true
fi
echo "build-image.sh: imported ${image} in $((SECONDS - start)) s ($(podman image inspect --format '{{.Size}}' "${image}") bytes)"
