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

Prefix caching follows SGLang's radix cache (radix_cache.py): at admission each request's
prompt is matched against the tree (``cached_tokens``), only the rest is prefilled (and counted
against --max-prefill-tokens), the prompts go into the tree after the prefill and prompt +
output when the request finishes. With --enable-metrics the engine feeds metrics.SglangMetrics
at the points where SGLang's scheduler and tokenizer manager record theirs.
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

from .metrics import SglangMetrics
from .numerics import token_logprob, token_seed
from .radix_cache import RadixCache, token_key
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
    key: bytes = b""  # the prompt's token ids (radix_cache.token_key)
    cached_tokens: int = 0  # prompt tokens the radix cache had at admission
    stream: bool = False  # streamed to the client (the metrics' is_streaming)
    log_metrics: bool = True  # False for /health_generate, as in SGLang
    queued_time: float | None = None
    prefilled: bool = False
    metric_time: float = 0.0  # last output the tokenizer manager's metrics saw
    metric_tokens: int = 0
    # Greedy requests (numerics.py): where a perturbed output diverges, the numerics, and the
    # chosen tokens' log-probabilities when the request asked for them (return_logprob).
    diverge_at: int | None = None
    numerics: str = "exact"
    logprobs: list | None = None
    text_in_logprobs: bool = False  # return_text_in_logprobs

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
        cache: RadixCache | None = None,
        metrics: SglangMetrics | None = None,
        stream_interval: int = 1,
    ):
        self.model = model
        self.codec = codec
        self.speed = speed
        self.max_total_num_tokens = max(max_total_num_tokens, 1)
        self.cuda_graph = cuda_graph
        self.on_finish = on_finish
        self.cache = cache if cache is not None else RadixCache(self.max_total_num_tokens)
        self.metrics = metrics
        self.stream_interval = max(int(stream_interval), 1)
        self.last_cache_hit_rate = 0.0
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
        request.queued_time = time.perf_counter()
        if request.max_new_tokens <= 0:
            self._finish(request)
            return
        self.waiting.append(request)
        self._wake.set()

    def abort(self, request: GenRequest) -> None:
        if request.aborted or request.finished:
            return
        request.aborted = True
        if request in self.waiting:
            self.waiting.remove(request)
        if self.metrics is not None and request.log_metrics:
            self.metrics.aborted()  # TokenizerManager.abort_request

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
            request.metric_time = request.first_token_time
        ids = request.output_ids
        ends = request.text_ends
        length = len(request.text)
        pieces = []
        for _ in range(min(count, request.remaining)):
            seed = token_seed(request.seed, len(ids), request.diverge_at)
            if request.logprobs is not None:
                request.logprobs.append(token_logprob(seed, len(ids), request.numerics))
            token_id, piece = self.codec.output_token(seed, len(ids))
            ids.append(token_id)
            pieces.append(piece)
            length += len(piece)
            ends.append(length)
        request.text += "".join(pieces)
        self.total_generated += len(pieces)
        self._log_tokens += len(pieces)
        if request.remaining == 0:
            self._finish(request)
        elif request.stream:
            self._streamed_output(request)
        request.changed.set()

    def _streamed_output(self, request: GenRequest) -> None:
        """TokenizerManager.collect_metrics for one output of a streamed request: the first gives
        the time to first token, each later one an inter-token latency over its new tokens (the
        scheduler sends a streamed request's output every --stream-interval tokens)."""
        metrics = self.metrics
        if metrics is None or not request.log_metrics:
            return
        produced = len(request.output_ids)
        if request.metric_tokens == 0:
            metrics.first_output(request.first_token_time - request.created, streamed=True)
        elif produced - request.metric_tokens >= self.stream_interval or request.finished:
            now = time.perf_counter()
            metrics.next_output(now - request.metric_time, produced - request.metric_tokens)
            request.metric_time = now
        else:
            return
        request.metric_tokens = produced

    def _finish(self, request: GenRequest) -> None:
        request.finished = True
        request.finished_time = time.perf_counter()
        if request.eos_hit and len(request.output_ids) < request.max_new_tokens:
            request.finish_reason = {"type": "stop", "matched": self.codec.eos_token_id}
        else:
            request.finish_reason = {"type": "length", "length": request.max_new_tokens}
        if request.prefilled and request.key:
            # cache_finished_req: prompt + output, less the last token (it has no KV yet)
            self.cache.insert(request.key + token_key(request.output_ids[:-1]))
        if self.metrics is not None and request.log_metrics:
            if request.stream and request.metric_tokens:
                self._streamed_output(request)
            else:  # not streamed: its first output to the tokenizer is the last one
                self.metrics.first_output(request.finished_time - request.created, request.stream)
            self.metrics.finished(request.prompt_tokens, len(request.output_ids),
                                  request.cached_tokens, request.e2e_latency(), request.stream)
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
                self._publish_idle()
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
                tokens = cached = 0
                while self.waiting and len(batch) < capacity:
                    nxt = self.waiting[0]
                    # the radix cache's match; SGLang computes at least the last prompt token
                    hit = self.cache.match_prefix(nxt.key, nxt.prompt_tokens - 1) if nxt.key else 0
                    extend = nxt.prompt_tokens - hit
                    if batch and tokens + extend > model.max_prefill_tokens:
                        break
                    batch.append(self.waiting.popleft())
                    nxt.cached_tokens = hit
                    tokens += extend
                    cached += hit
                self._admitted(batch)
                clock = max(clock, loop.time() - 1.0) + model.prefill_seconds(tokens) / self.speed
                await self._sleep_until(loop, clock)
                batch = [r for r in batch if not r.aborted]
                self.total_prompt += tokens + cached
                for request in batch:
                    request.prefilled = True
                    if request.key:
                        self.cache.insert(request.key)  # cache_unfinished_req
                for request in batch:
                    self._emit(request, 1)
                self.running.extend(r for r in batch if not r.finished)
                self._log_prefill(len(batch), tokens, cached)
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

    def _admitted(self, batch: list[GenRequest]) -> None:
        """The batch's first forward: each request's queueing time (Req time stats)."""
        if self.metrics is None:
            return
        now = time.perf_counter()
        for request in batch:
            self.metrics.queued(now - (request.queued_time or now))

    def _publish_idle(self) -> None:
        """metrics_reporter._maybe_log_idle_metrics: the idle scheduler publishes at once."""
        if self.metrics is not None:
            self.metrics.scheduler_stats(num_running_reqs=0, num_queue_reqs=0, gen_throughput=0.0,
                                         token_usage=0.0, num_used_tokens=0)

    # --- SGLang-style batch logs ----------------------------------------------

    def _log_prefill(self, new_seqs: int, new_tokens: int, cached_tokens: int = 0) -> None:
        now = time.perf_counter()
        self.last_input_throughput = new_tokens / max(now - self._prefill_tic, 1e-9)
        self._prefill_tic = now
        used, usage = self.token_usage()
        total = new_tokens + cached_tokens
        self.last_cache_hit_rate = cached_tokens / total if total > 0 else 0.0
        if self.metrics is not None:  # report_prefill_stats
            self.metrics.scheduler_stats(
                num_running_reqs=len(self.running), num_queue_reqs=len(self.waiting),
                cache_hit_rate=self.last_cache_hit_rate, token_usage=usage, num_used_tokens=used)
        logger.info(
            f"Prefill batch, #new-seq: {new_seqs}, #new-token: {new_tokens}, "
            f"#cached-token: {cached_tokens}, token usage: {usage:.2f}, "
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
        if self.metrics is not None:  # report_decode_stats: the hit rate goes back to 0
            self.metrics.scheduler_stats(
                num_running_reqs=running, num_queue_reqs=len(self.waiting),
                gen_throughput=self.last_gen_throughput, cache_hit_rate=0.0, token_usage=usage,
                num_used_tokens=used)
        logger.info(
            f"Decode batch, #running-req: {running}, #token: {used}, "
            f"token usage: {usage:.2f}, cuda graph: {self.cuda_graph}, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.waiting)}"
        )
        self._log_steps = 0
        self._log_tokens = 0
        self._log_tic = now
