# shellcheck shell=bash
# Source this file (". tools/containers/env.sh") to point podman at the
# project's containers.conf. Nothing under /etc is edited.
__containers_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="${__containers_dir}/containers.conf"
# The locally built test image (tools/containers/build-image.sh).
export SGLANG_LAB_TEST_IMAGE="${SGLANG_LAB_TEST_IMAGE:-localhost/sglang-lab-debian:bookworm}"
unset __containers_dir
