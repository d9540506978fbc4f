# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SYNTHETIC continuous-batching engine (runs in the main process).

One asyncio task plays SGLang's scheduler loop: requests wait in a queue,
up to max_running_requests run at once, a prefill iteration admits waiting
requests (each gets its first token), a decode iteration gives every running
request one more token. Iteration times come from ThroughputModel, divided by
SGLANG_SIM_SPEED. With --num-continuous-decode-steps N, new requests are
admitted only every N decode iterations, as in SGLang.

The engine keeps a simulated clock: if the event loop falls behind (a busy
2-core machine), the missed decode iterations are applied at once, so the
token rate follows the model rather than the CPU; the streams then carry
several tokens per chunk, which bench_serving handles.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .throughput import ThroughputModel
from .tokenizer import TextCodec

logger = logging.getLogger("sglang_sim.engine")


@dataclass(eq=False)
class GenRequest:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    ignore_eos: bool = True
    seed: int = 0
    created: float = field(default_factory=time.perf_counter)
    output_ids: list = field(default_factory=list)
    text: str = ""
    text_ends: list = field(default_factory=list)  # len(text) after each token
    finished: bool = False
    aborted: bool = False
    finish_reason: dict | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    stop_at: int = 0
    eos_hit: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self):
        self.stop_at = self.max_new_tokens
        if not self.ignore_eos and self.max_new_tokens > 0:
            # A synthetic end-of-sequence position, deterministic per request
            # content: about 1 in 256 tokens is EOS.
            position = 1 + int(random.Random(self.seed).expovariate(1 / 256.0))
            if position < self.max_new_tokens:
                self.stop_at = position
                self.eos_hit = True

    @property
    def remaining(self) -> int:
        return max(self.stop_at - len(self.output_ids), 0)

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)

    def text_after(self, tokens: int) -> str:
        """Text of the output tokens after the first ``tokens``."""
        return self.text[self.text_ends[tokens - 1]:] if tokens > 0 else self.text

    def e2e_latency(self) -> float:
        end = self.finished_time if self.finished_time is not None else time.perf_counter()
        return end - self.created


def request_seed(text: str | None, input_ids: list | None, rid: str) -> int:
    basis = text if text is not None else ",".join(map(str, input_ids or []))
    return zlib.crc32((basis + "|" + rid).encode("utf-8", "replace"))


class Engine:
    def __init__(
        self,
        model: ThroughputModel,
        codec: TextCodec,
        speed: float,
        max_total_num_tokens: int,
        cuda_graph: bool,
        on_finish: Callable[[GenRequest], None] | None = None,
    ):
        self.model = model
        self.codec = codec
        self.speed = speed
        self.max_total_num_tokens = max(max_total_num_tokens, 1)
        self.cuda_graph = cuda_graph
        self.on_finish = on_finish
        self.waiting: collections.deque[GenRequest] = collections.deque()
        self.running: list[GenRequest] = []
        self._wake = asyncio.Event()
        self.total_generated = 0
        self.total_prompt = 0
        self.last_gen_throughput = 0.0
        self._log_tokens = 0
        self._log_steps = 0
        self._log_tic = time.perf_counter()
        self._prefill_tic = self._log_tic
        self.last_input_throughput = 0.0

    # --- requests -------------------------------------------------------------

    def submit(self, request: GenRequest) -> None:
        if request.max_new_tokens <= 0:
            self._finish(request)
            return
        self.waiting.append(request)
        self._wake.set()

    def abort(self, request: GenRequest) -> None:
        request.aborted = True
        if request in self.waiting:
            self.waiting.remove(request)

    @property
    def num_active(self) -> int:
        return len(self.running) + len(self.waiting)

    def token_usage(self) -> tuple[int, float]:
        used = sum(r.prompt_tokens + len(r.output_ids) for r in self.running)
        return used, used / self.max_total_num_tokens

    # --- token production -----------------------------------------------------

    def _emit(self, request: GenRequest, count: int) -> None:
        if request.first_token_time is None:
            request.first_token_time = time.perf_counter()
        ids = request.output_ids
        ends = request.text_ends
        length = len(request.text)
        pieces = []
        for _ in range(min(count, request.remaining)):
            token_id, piece = self.codec.output_token(request.seed, len(ids))
            ids.append(token_id)
            pieces.append(piece)
            length += len(piece)
            ends.append(length)
        request.text += "".join(pieces)
        self.total_generated += len(pieces)
        self._log_tokens += len(pieces)
        if request.remaining == 0:
            self._finish(request)
        request.changed.set()

    def _finish(self, request: GenRequest) -> None:
        request.finished = True
        request.finished_time = time.perf_counter()
        if request.eos_hit and len(request.output_ids) < request.max_new_tokens:
            request.finish_reason = {"type": "stop", "matched": self.codec.eos_token_id}
        else:
            request.finish_reason = {"type": "length", "length": request.max_new_tokens}
        request.changed.set()
        if self.on_finish is not None:
            self.on_finish(request)

    # --- the loop -------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        clock = loop.time()
        decode_since_admit = 0
        model = self.model
        while True:
            self.running = [r for r in self.running if not r.finished and not r.aborted]
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                clock = loop.time()
                decode_since_admit = model.continuous_decode_steps
            capacity = model.max_running_requests - len(self.running)
            admit = (
                self.waiting
                and capacity > 0
                and (not self.running or decode_since_admit >= model.continuous_decode_steps)
            )
            if admit:
                batch: list[GenRequest] = []
                tokens = 0
                while self.waiting and len(batch) < capacity:
                    nxt = self.waiting[0]
                    if batch and tokens + nxt.prompt_tokens > model.max_prefill_tokens:
                        break
                    batch.append(self.waiting.popleft())
                    tokens += nxt.prompt_tokens
                clock = max(clock, loop.time() - 1.0) + model.prefill_seconds(tokens) / self.speed
                await self._sleep_until(loop, clock)
                batch = [r for r in batch if not r.aborted]
                self.total_prompt += tokens
                for request in batch:
                    self._emit(request, 1)
                self.running.extend(r for r in batch if not r.finished)
                self._log_prefill(len(batch), tokens)
                decode_since_admit = 0
                continue

            step = model.decode_step_seconds(len(self.running)) / self.speed
            clock += step
            await self._sleep_until(loop, clock)
            live = [r for r in self.running if not r.finished and not r.aborted]
            if not live:
                continue
            steps = 1
            limit = min(r.remaining for r in live)
            if self.waiting:
                limit = min(limit, max(model.continuous_decode_steps - decode_since_admit, 1))
            now = loop.time()
            while steps < limit and clock + step <= now:
                clock += step
                steps += 1
            for request in live:
                self._emit(request, steps)
            decode_since_admit += steps
            self._log_decode(steps, len(live))

    @staticmethod
    async def _sleep_until(loop, deadline: float) -> None:
        delay = deadline - loop.time()
        await asyncio.sleep(delay if delay > 0 else 0)

    # --- SGLang-style batch logs ----------------------------------------------

    def _log_prefill(self, new_seqs: int, new_tokens: int) -> None:
        now = time.perf_counter()
        self.last_input_throughput = new_tokens / max(now - self._prefill_tic, 1e-9)
        self._prefill_tic = now
        _, usage = self.token_usage()
        logger.info(
            f"Prefill batch, #new-seq: {new_seqs}, #new-token: {new_tokens}, "
            f"#cached-token: 0, token usage: {usage:.2f}, "
            f"#running-req: {len(self.running)}, #queue-req: {len(self.waiting)}, "
            f"cuda graph: False, input throughput (token/s): {self.last_input_throughput:.2f}"
        )

    def _log_decode(self, steps: int, running: int) -> None:
        self._log_steps += steps
        if self._log_steps < self.model.decode_log_interval:
            return
        now = time.perf_counter()
        elapsed = max(now - self._log_tic, 1e-9)
        self.last_gen_throughput = self._log_tokens / elapsed
        used, usage = self.token_usage()
        logger.info(
            f"Decode batch, #running-req: {running}, #token: {used}, "
            f"token usage: {usage:.2f}, cuda graph: {self.cuda_graph}, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.waiting)}"
        )
        self._log_steps = 0
        self._log_tokens = 0
        self._log_tic = now
