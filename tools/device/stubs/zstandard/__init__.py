# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Stand-in for zstandard on the lent H200 (tools/device/make_kit.sh): SGLang 0.5.17's HTTP server
# imports it at start-up to decompress request bodies sent with `x-body-compressed: zstd`, which no
# client of this project sends. The real wheel (5.5 MB) would not fit the device's 64 MiB carry.


class ZstdDecompressor:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("zstandard is a stand-in on this machine: compressed request bodies are not supported")
