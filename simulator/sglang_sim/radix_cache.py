# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's radix prefix cache, as the SYNTHETIC engine needs it: which prompt tokens hit.

What it keeps from SGLang's ``mem_cache/radix_cache.py`` (page size 1, the default):

- The tree holds token-id sequences. A request's cached tokens are the longest prefix of its
  prompt already in the tree, capped at ``len(prompt) - 1``: SGLang always computes at least
  the last prompt token (``Req._compute_max_prefix_len``: ``input_len - 1``).
- A request's prompt goes into the tree after its prefill (``cache_unfinished_req``), its prompt
  plus output (without the last output token, which has no KV yet) when it finishes
  (``cache_finished_req``). Requests prefilled in the same batch do not hit each other.
- ``/flush_cache`` empties the tree (``reset``).
- When the tree holds more tokens than the KV pool, least recently used leaves are evicted
  (SGLang evicts only when it needs room; the simulator has no pool to fill, so it keeps the
  tree within the simulated ``max_total_num_tokens``, which also bounds its memory; once over,
  it evicts down to 90 % of it).

Keys are bytes, 4 per token (``array('I')``, ids masked to 32 bits), so a prefix compare is one
C-level slice compare and a million cached tokens take 4 MB.
"""

from __future__ import annotations

import heapq
import itertools
from array import array
from collections.abc import Iterable

TOKEN_BYTES = 4
EVICT_TO = 0.9
_MASK = 0xFFFFFFFF


def token_key(ids: Iterable[int]) -> bytes:
    """The cache key of a token-id sequence."""
    return array("I", (int(i) & _MASK for i in ids)).tobytes()


def _common_tokens(a: bytes, b: bytes) -> int:
    """Number of leading tokens two keys share (binary search over C slice compares)."""
    limit = min(len(a), len(b)) // TOKEN_BYTES
    if a[:limit * TOKEN_BYTES] == b[:limit * TOKEN_BYTES]:
        return limit
    lo, hi = 0, limit  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid * TOKEN_BYTES] == b[:mid * TOKEN_BYTES]:
            lo = mid
        else:
            hi = mid
    return lo


class _Node:
    __slots__ = ("key", "children", "parent", "last_access")

    def __init__(self, key: bytes, parent: _Node | None, tick: int):
        self.key = key
        self.children: dict[bytes, _Node] = {}
        self.parent = parent
        self.last_access = tick


class RadixCache:
    """Prefix matches, inserts, LRU eviction beyond ``capacity`` tokens, reset."""

    def __init__(self, capacity: int, enabled: bool = True):
        self.capacity = max(int(capacity), 1)
        self.enabled = enabled  # False: --disable-radix-cache (SGLang's ChunkCache never hits)
        self._ticks = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        self.root = _Node(b"", None, 0)
        self.total_tokens = 0

    # --- lookups --------------------------------------------------------------------------

    def match_prefix(self, key: bytes, limit: int | None = None) -> int:
        """Tokens of ``key`` (at most ``limit``) already in the tree; touches the matched path."""
        if not self.enabled:
            return 0
        if limit is not None:
            key = key[:max(limit, 0) * TOKEN_BYTES]
        tick = next(self._ticks)
        node, matched = self.root, 0
        while key:
            child = node.children.get(key[:TOKEN_BYTES])
            if child is None:
                break
            common = _common_tokens(child.key, key)
            child.last_access = tick
            matched += common
            if common * TOKEN_BYTES < len(child.key):
                break
            node, key = child, key[common * TOKEN_BYTES:]
        return matched

    # --- inserts and eviction ---------------------------------------------------------------

    def insert(self, key: bytes) -> None:
        if not self.enabled or not key:
            return
        tick = next(self._ticks)
        node = self.root
        while key:
            head = key[:TOKEN_BYTES]
            child = node.children.get(head)
            if child is None:
                node.children[head] = _Node(key, node, tick)
                self.total_tokens += len(key) // TOKEN_BYTES
                break
            common = _common_tokens(child.key, key) * TOKEN_BYTES
            child.last_access = tick
            if common < len(child.key):  # split the child at the mismatch
                upper = _Node(child.key[:common], node, tick)
                node.children[head] = upper
                child.key = child.key[common:]
                child.parent = upper
                upper.children[child.key[:TOKEN_BYTES]] = child
                child = upper
            node, key = child, key[common:]
        if self.total_tokens > self.capacity:
            # down to EVICT_TO of the capacity, so that a full tree is not walked on every insert
            self.evict(self.total_tokens - int(self.capacity * EVICT_TO))

    def evict(self, tokens: int) -> int:
        """Remove least recently used leaves until ``tokens`` tokens are gone; returns how many."""
        leaves = [(n.last_access, id(n), n) for n in self._nodes() if not n.children]
        heapq.heapify(leaves)
        freed = 0
        while leaves and freed < tokens:
            _, _, leaf = heapq.heappop(leaves)
            parent = leaf.parent
            if parent is None:
                continue
            del parent.children[leaf.key[:TOKEN_BYTES]]
            size = len(leaf.key) // TOKEN_BYTES
            freed += size
            self.total_tokens -= size
            if parent is not self.root and not parent.children:
                heapq.heappush(leaves, (parent.last_access, id(parent), parent))
        return freed

    def _nodes(self):
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node is not self.root:
                yield node
            stack.extend(node.children.values())
