#!/bin/bash
# STAND-IN for NVIDIA's CUDA apt repository, built inside a molecule test
# container. Layout and signing follow NVIDIA's flat repositories:
#   <root>/<distribution>/<arch>/{Packages,Packages.gz,Release,Release.gpg,InRelease,*.deb}
# plus the stand-in's own signing key (stand-in-signing-key.asc, its
# fingerprint in stand-in-signing-key.fpr). The one package is a STAND-IN
# cuda-toolkit-12-8 12.8.1-1 whose /usr/local/cuda-12.8/bin/nvcc prints the
# text of NVIDIA's nvcc 12.8.93 (`nvcc --version`) and compiles nothing.
# A second version, 12.9.0-1, is there to prove the role's apt pin holds.
# Usage: make-stand-in-cuda-repo.sh ROOT
set -euo pipefail

root=$1
# shellcheck source=/dev/null
. /etc/os-release
dist="debian${VERSION_ID%%.*}"
case "$(uname -m)" in
    x86_64) arch_dir=x86_64 ;;
    aarch64) arch_dir=sbsa ;;
    *) arch_dir=$(uname -m) ;;
esac
deb_arch=$(dpkg --print-architecture)
repo="${root}/${dist}/${arch_dir}"
work=$(mktemp -d)
export GNUPGHOME="${root}/.gnupg"
mkdir -p "${repo}" "${GNUPGHOME}"
chmod 0700 "${GNUPGHOME}"

build_package() {
    local version=$1 release=$2 build=$3
    local tree="${work}/cuda-toolkit-12-8_${version}"
    mkdir -p "${tree}/DEBIAN" "${tree}/usr/local/cuda-12.8/bin" "${tree}/usr/local/cuda-12.8/lib64"
    cat >"${tree}/DEBIAN/control" <<CONTROL
Package: cuda-toolkit-12-8
Version: ${version}
Architecture: ${deb_arch}
Maintainer: sglang-lab molecule tests <stand-in@invalid>
Description: STAND-IN for NVIDIA's cuda-toolkit-12-8 (molecule test only)
 Installs a fake nvcc that prints NVIDIA's version text for CUDA ${release}
 and compiles nothing. Not NVIDIA software.
CONTROL
    cat >"${tree}/usr/local/cuda-12.8/bin/nvcc" <<NVCC
#!/bin/sh
# STAND-IN nvcc (molecule test): prints nvcc's version text, compiles nothing.
case "\$1" in
    --version|-V)
        echo "nvcc: NVIDIA (R) Cuda compiler driver"
        echo "Copyright (c) 2005-2025 NVIDIA Corporation"
        echo "Built on Fri_Feb_21_20:23:50_PST_2025"
        echo "Cuda compilation tools, release ${release}, V${build}"
        echo "Build cuda_${release}.r${release}/compiler.35583870_0"
        ;;
    *) echo "STAND-IN nvcc: only --version is implemented" >&2; exit 2 ;;
esac
NVCC
    chmod 0755 "${tree}/usr/local/cuda-12.8/bin/nvcc"
    echo "STAND-IN: no CUDA libraries here (molecule test)" >"${tree}/usr/local/cuda-12.8/lib64/STAND-IN.txt"
    dpkg-deb --root-owner-group --build "${tree}" "${repo}/cuda-toolkit-12-8_${version}_${deb_arch}.deb" >/dev/null
}

build_package 12.8.1-1 12.8 12.8.93
build_package 12.9.0-1 12.9 12.9.41

gpg --batch --quiet --passphrase '' --quick-gen-key \
    "sglang-lab STAND-IN CUDA repository key (molecule test only) <stand-in@invalid>" ed25519 sign never
fpr=$(gpg --batch --with-colons --list-keys | awk -F: '$1 == "fpr" { print $10; exit }')
gpg --batch --armor --export "${fpr}" >"${repo}/stand-in-signing-key.asc"
echo "${fpr}" >"${repo}/stand-in-signing-key.fpr"

cd "${repo}"
apt-ftparchive packages . >Packages
gzip -9 -k -f Packages
apt-ftparchive \
    -o APT::FTPArchive::Release::Origin="sglang-lab stand-in" \
    -o APT::FTPArchive::Release::Label="STAND-IN NVIDIA CUDA" \
    release . >Release
gpg --batch --yes --default-key "${fpr}" --armor --detach-sign -o Release.gpg Release
gpg --batch --yes --default-key "${fpr}" --clearsign -o InRelease Release
chmod -R a+rX "${root}"
rm -rf "${work}"
echo "${repo}" >"${root}/READY"
echo "stand-in CUDA repository at ${repo}, key ${fpr}"
