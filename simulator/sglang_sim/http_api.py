# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's HTTP API, answered by the SYNTHETIC engine (aiohttp).

Shapes follow SGLang 0.5.10's entrypoints/http_server.py and the fields its
bench_serving client reads: native /generate (streamed as ``data: {json}``
lines ending in ``data: [DONE]``, ``text`` cumulative, ``meta_info`` with
prompt_tokens / completion_tokens / cached_tokens / finish_reason / id /
e2e_latency), the OpenAI-compatible /v1/completions and
/v1/chat/completions, /health, /health_generate, /model_info,
/server_info, /v1/models, /flush_cache (which empties the radix cache) and
/get_load, and with --enable-metrics SGLang's Prometheus /metrics (metrics.py)
and its HTTP request counters. A streamed /generate that fails validation
answers HTTP 200 with an error chunk, as SGLang does. Every body that carries
numbers also says ``"synthetic": true``; /metrics says it in a comment line
(which Prometheus parsers skip) and an ``X-SGLang-Sim: synthetic`` header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .engine import Engine, GenRequest, request_seed
from .logs import uvicorn_logger
from .metrics import SglangMetrics
from .numerics import divergence_position, greedy_seed
from .radix_cache import token_key
from .sglang_rules import stream_error_body

logger = logging.getLogger("sglang_sim")

# LOADING: the warm-up request runs (the port is bound only after the load, as in SGLang)
LOADING, READY, HANG, DRAINING = "loading", "ready", "hang", "draining"
HEALTH_PATHS = ("/health", "/health_generate")
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's SamplingParams default
OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS = 16


class ServerState:
    """Everything the handlers need; owned by launch_server."""

    def __init__(self, args: dict, engine: Engine, info: dict,
                 on_request_done: Callable[[], None] | None = None,
                 metrics: SglangMetrics | None = None):
        self.args = args
        self.engine = engine
        self.metrics = metrics  # set with --enable-metrics
        self.info = info  # version, simulator block, scheduler info
        self.status = LOADING
        self.on_request_done = on_request_done
        self.in_flight: set[GenRequest] = set()
        self.completed_requests = 0
        self.started = time.time()

    @property
    def served_model_name(self) -> str:
        return str(self.args.get("served_model_name") or self.args.get("model_path"))

    @property
    def context_len(self) -> int:
        return int(self.info["context_len"])

    @property
    def new_family(self) -> bool:
        """SGLang 0.5.11 and later (sglang_rules.is_new_family)."""
        return bool(self.info.get("new_family"))


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), default=str).encode("utf-8")


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=_dumps(data), status=status, content_type="application/json")


def _error(message: str, status: int = 400, err_type: str = "BadRequestError") -> web.Response:
    return _json({"object": "error", "message": message, "type": err_type, "param": None,
                  "code": status}, status)


async def _never() -> None:
    await asyncio.Event().wait()


# --- middleware ---------------------------------------------------------------


@web.middleware
async def access_log(request: web.Request, handler):
    """uvicorn's access line: ``INFO:     ip:port - "GET /x HTTP/1.1" 200 OK``."""
    response = await handler(request)
    peer = request.transport.get_extra_info("peername") if request.transport else None
    client = f"{peer[0]}:{peer[1]}" if peer else "-"
    version = f"{request.version.major}.{request.version.minor}"
    reason = getattr(response, "reason", "")
    uvicorn_logger.info(
        f'{client} - "{request.method} {request.path_qs} HTTP/{version}" {response.status} {reason}'
    )
    return response


METRICS_PATH = "/metrics"


def _http_metrics(metrics: SglangMetrics):
    """add_prometheus_track_response_middleware (--enable-metrics): every HTTP request counted by
    route and method, its response by status code; /metrics itself included."""

    @web.middleware
    async def track(request: web.Request, handler):
        resource = request.match_info.route.resource if request.match_info.route else None
        if request.path.startswith(METRICS_PATH):
            endpoint = METRICS_PATH  # SGLang mounts the exporter at /metrics
        elif resource is not None:
            endpoint = resource.canonical
        else:
            endpoint = request.path
        method = request.method
        metrics.http_begin(endpoint, method)
        status = None
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            metrics.http_end(endpoint, method, status)

    return track


def _gate(state: ServerState):
    """/health and /health_generate: 503 during the warm-up request and while draining (every
    other endpoint answers, as recorded on 0.5.17); under the hang fault nothing is answered."""

    @web.middleware
    async def gate(request: web.Request, handler):
        if state.status == HANG:
            await _never()
        if state.status in (LOADING, DRAINING) and request.path in HEALTH_PATHS:
            return web.Response(status=503)
        return await handler(request)

    return gate


# --- request parsing ------------------------------------------------------------


def _prompt_ids(state: ServerState, text: Any, input_ids: Any) -> list[int]:
    if input_ids is not None:
        if not isinstance(input_ids, list) or not all(isinstance(i, int) for i in input_ids):
            raise ValueError("input_ids must be a list of integers")
        return input_ids
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    return state.engine.codec.encode(text)


def _new_request(state: ServerState, text: Any, input_ids: Any, max_new_tokens: Any,
                 ignore_eos: Any, rid: str | None = None, stream: bool = False,
                 temperature: Any = None, return_logprob: bool = False) -> GenRequest:
    if text is None and input_ids is None:
        raise ValueError("Either text, input_ids or input_embeds should be provided.")
    ids = _prompt_ids(state, text, input_ids)
    prompt_tokens = len(ids)
    explicit = max_new_tokens is not None
    if not explicit:
        max_new_tokens = DEFAULT_MAX_NEW_TOKENS
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    context_len = state.context_len
    truncate = bool(state.args.get("allow_auto_truncate"))
    # TokenizerManager._validate_one_request, same messages
    if prompt_tokens >= context_len:
        if not truncate:
            raise ValueError(
                f"The input ({prompt_tokens} tokens) is longer than the "
                f"model's context length ({context_len} tokens)."
            )
        prompt_tokens = context_len
        ids = ids[:context_len]
    if explicit and max_new_tokens + prompt_tokens >= context_len:
        if not truncate:
            raise ValueError(
                "Requested token count exceeds the model's maximum context length "
                f"of {context_len} tokens. You requested a total of {max_new_tokens + prompt_tokens} "
                f"tokens: {prompt_tokens} tokens from the input messages and "
                f"{max_new_tokens} tokens for the completion. Please reduce the number "
                "of tokens in the input messages or the completion to fit within the limit."
            )
        max_new_tokens = max(0, context_len - prompt_tokens)
    max_new_tokens = min(max_new_tokens, max(0, context_len - prompt_tokens))
    rid = rid or uuid.uuid4().hex
    numerics = str((state.info.get("simulator") or {}).get("numerics") or "exact")
    # A greedy request's output is a function of its prompt (numerics.py); any other request's
    # also of its id, so repeated prompts do not all answer alike.
    greedy = not isinstance(temperature, bool) and isinstance(temperature, (int, float)) and temperature == 0
    if greedy:
        seed = greedy_seed(text if isinstance(text, str) else None, input_ids)
    else:
        seed = request_seed(text if isinstance(text, str) else None, input_ids, str(rid))
    return GenRequest(
        rid=str(rid),
        prompt_tokens=prompt_tokens,
        max_new_tokens=max_new_tokens,
        ignore_eos=bool(ignore_eos),
        seed=seed,
        key=token_key(ids),
        stream=bool(stream),
        diverge_at=divergence_position(seed, numerics) if greedy else None,
        numerics=numerics,
        logprobs=[] if return_logprob else None,
    )


def _meta_info(req: GenRequest) -> dict:
    meta = {
        "id": req.rid,
        "finish_reason": req.finish_reason if req.finished else None,
        "prompt_tokens": req.prompt_tokens,
        "weight_version": "default",
        "total_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": req.completion_tokens,
        "cached_tokens": req.cached_tokens,
        # output_streamer.get_cached_tokens_details: None without cached tokens
        "cached_tokens_details": {"device": req.cached_tokens, "host": 0} if req.cached_tokens else None,
        "synthetic": True,
    }
    if req.logprobs is not None:
        # TokenizerManager.detokenize_logprob_tokens: [logprob, token id, text or None] per token
        # (text only with return_text_in_logprobs); no prompt logprobs are simulated.
        pieces = [req.text[start:end] for start, end in zip([0] + req.text_ends[:-1], req.text_ends, strict=True)]
        meta["input_token_logprobs"] = []
        meta["output_token_logprobs"] = [
            [lp, tid, piece if req.text_in_logprobs else None]
            for lp, tid, piece in zip(req.logprobs, req.output_ids, pieces, strict=True)
        ]
    if req.finished:
        meta["e2e_latency"] = req.e2e_latency()
    return meta


async def _run_to_end(state: ServerState, req: GenRequest) -> None:
    state.engine.submit(req)
    while not req.finished:
        await req.changed.wait()
        req.changed.clear()


async def _stream(state: ServerState, request: web.Request, req: GenRequest,
                  make_chunks: Callable[[GenRequest, int], list[bytes]]) -> web.StreamResponse:
    """Send chunks as tokens appear; ``make_chunks(req, sent)`` renders them."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    interval = max(int(state.args.get("stream_interval") or 1), 1)
    state.in_flight.add(req)
    try:
        await response.prepare(request)
        state.engine.submit(req)
        sent = 0
        while True:
            await req.changed.wait()
            req.changed.clear()
            produced = req.completion_tokens
            if produced == sent and not req.finished:
                continue
            if not req.finished and sent > 0 and produced - sent < interval:
                continue
            for chunk in make_chunks(req, sent):
                await response.write(chunk)
            sent = produced
            if req.finished:
                break
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        state.engine.abort(req)
        raise
    finally:
        state.in_flight.discard(req)
    _count_done(state)
    return response


async def _send_and_count(state: ServerState, request: web.Request,
                          response: web.Response) -> web.Response:
    """Send the whole response first, then count the request as done."""
    await response.prepare(request)
    await response.write_eof()
    _count_done(state)
    return response


def _count_done(state: ServerState) -> None:
    state.completed_requests += 1
    if state.on_request_done is not None:
        state.on_request_done()


async def _body(request: web.Request) -> dict:
    try:
        data = await request.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"invalid JSON body: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("the request body must be a JSON object")
    return data


# --- native endpoints -------------------------------------------------------------


def build_app(state: ServerState) -> web.Application:
    middlewares = [access_log, _gate(state)]
    if state.metrics is not None:
        middlewares.insert(0, _http_metrics(state.metrics))
    app = web.Application(middlewares=middlewares, client_max_size=256 * 1024**2)
    routes = web.RouteTableDef()

    @routes.route("*", METRICS_PATH + "{tail:.*}")
    async def metrics(request):
        """--enable-metrics: prometheus_client's ASGI app mounted at ^/metrics(.*)$, any method,
        gzip when accepted. Without the flag there is no such route: FastAPI's 404 (recorded on
        0.5.17: ep_metrics.txt)."""
        if state.metrics is None:
            return _json({"detail": "Not Found"}, 404)
        body, headers = state.metrics.body(request.headers.get("Accept-Encoding", ""))
        return web.Response(body=body, headers=headers)

    @routes.get("/health")
    async def health(_request):
        return web.Response(status=200)

    @routes.get("/health_generate")
    async def health_generate(_request):
        # http_server.health_generate: input_ids [0], 1 token, log_metrics=False
        req = GenRequest(rid=f"HEALTH_CHECK_{uuid.uuid4().hex}", prompt_tokens=1, max_new_tokens=1,
                         key=token_key([0]), log_metrics=False)
        try:
            await asyncio.wait_for(_run_to_end(state, req), timeout=20)
        except TimeoutError:
            state.engine.abort(req)
            return web.Response(status=503)
        return web.Response(status=200)

    async def model_info_body() -> dict:
        return {
            "model_path": state.args.get("model_path"),
            "tokenizer_path": state.args.get("tokenizer_path"),
            "is_generation": True,
            "preferred_sampling_params": state.args.get("preferred_sampling_params"),
            "weight_version": state.args.get("weight_version") or "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": state.info.get("model_type"),
            "architectures": state.info.get("architectures"),
            "synthetic": True,
        }

    @routes.get("/model_info")
    async def model_info(_request):
        return _json(await model_info_body())

    @routes.get("/get_model_info")
    async def get_model_info(_request):
        logger.warning(
            "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
            "Please use '/model_info' instead."
        )
        return _json(await model_info_body())

    def server_info_body() -> dict:
        engine = state.engine
        used, usage = engine.token_usage()
        return {
            **state.args,
            "max_total_num_tokens": state.info["max_total_num_tokens"],
            "max_req_input_len": state.info["max_req_input_len"],
            "internal_states": [
                {
                    "last_gen_throughput": engine.last_gen_throughput,
                    "num_running_reqs": len(engine.running),
                    "num_waiting_reqs": len(engine.waiting),
                    "token_usage": usage,
                    "synthetic": True,
                }
            ],
            "version": state.info["version"],
            "synthetic": True,
            "simulator": state.info["simulator"],
        }

    @routes.get("/server_info")
    async def server_info(_request):
        return _json(server_info_body())

    @routes.get("/get_server_info")
    async def get_server_info(_request):
        logger.warning(
            "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
            "Please use '/server_info' instead."
        )
        return _json(server_info_body())

    def load_body() -> list:
        engine = state.engine
        used, _ = engine.token_usage()
        return [
            {
                "dp_rank": 0,
                "num_reqs": engine.num_active,
                "num_waiting_reqs": len(engine.waiting),
                "num_tokens": used,
                "synthetic": True,
            }
        ]

    @routes.get("/get_load")
    async def get_load(_request):
        logger.warning(
            "Endpoint '/get_load' is deprecated and will be removed in a future version. "
            "Please use '/v1/loads' instead."
        )
        return _json(load_body())

    @routes.get("/v1/loads")
    async def v1_loads(_request):
        return _json({"loads": load_body(), "synthetic": True})

    @routes.route("*", "/flush_cache")
    async def flush_cache(request):
        if request.method not in ("GET", "POST"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
        if state.engine.num_active:
            return web.Response(status=400, text="Flush cache failed.\n")
        state.engine.cache.reset()
        logger.info("Cache flushed successfully!")
        return web.Response(
            text=(
                "Cache flushed.\nPlease check backend logs for more details. "
                "(When there are running or waiting requests, the operation will not be performed.)\n"
            )
        )

    def model_card() -> dict:
        name = state.served_model_name
        return {
            "id": name,
            "object": "model",
            "created": int(state.started),
            "owned_by": "sglang",
            "root": name,
            "parent": None,
            "max_model_len": state.context_len,
        }

    @routes.get("/v1/models")
    async def v1_models(_request):
        return _json({"object": "list", "data": [model_card()]})

    @routes.get("/v1/models/{model:.+}")
    async def v1_model(request):
        model = request.match_info["model"]
        if model != state.served_model_name:
            return _json(
                {"error": {"message": f"The model '{model}' does not exist",
                           "type": "invalid_request_error", "param": "model",
                           "code": "model_not_found"}},
                404,
            )
        return _json(model_card())

    async def stream_error(request, message: str) -> web.StreamResponse:
        """http_server.py stream_results: the validation error comes inside an HTTP 200 stream
        (recorded on 0.5.17: generate_stream_too_long.txt), then ``data: [DONE]``."""
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        await response.write(b"data: " + _dumps(stream_error_body(state.new_family, message)) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    @routes.route("*", "/generate")
    async def generate(request):
        if request.method not in ("POST", "PUT"):
            raise web.HTTPMethodNotAllowed(request.method, ["POST", "PUT"])
        try:
            body = await _body(request)
        except ValueError as exc:
            logger.error(f"[http_server] Error: {exc}")
            return _json({"error": {"message": str(exc)}}, 400)
        try:
            params = body.get("sampling_params") or {}
            if not isinstance(params, dict):
                raise ValueError("sampling_params must be an object")
            text, input_ids = body.get("text"), body.get("input_ids")
            batch = isinstance(text, list) or (
                isinstance(input_ids, list) and input_ids and isinstance(input_ids[0], list)
            )
            if batch:
                if body.get("stream"):
                    raise ValueError("sglang-sim does not stream batched /generate requests")
                items = text if isinstance(text, list) else input_ids
                reqs = [
                    _new_request(
                        state,
                        item if isinstance(text, list) else None,
                        None if isinstance(text, list) else item,
                        params.get("max_new_tokens"),
                        params.get("ignore_eos", False),
                        temperature=params.get("temperature"),
                        return_logprob=bool(body.get("return_logprob")),
                    )
                    for item in items
                ]
            else:
                reqs = [
                    _new_request(state, text, input_ids, params.get("max_new_tokens"),
                                 params.get("ignore_eos", False), body.get("rid"),
                                 stream=bool(body.get("stream")),
                                 temperature=params.get("temperature"),
                                 return_logprob=bool(body.get("return_logprob")))
                ]
            for req in reqs:
                req.text_in_logprobs = bool(body.get("return_text_in_logprobs"))
        except ValueError as exc:
            logger.error(f"[http_server] Error: {exc}")
            if body.get("stream"):
                return await stream_error(request, str(exc))
            return _json({"error": {"message": str(exc)}}, 400)

        if body.get("stream"):

            def chunks(req: GenRequest, _sent: int) -> list[bytes]:
                out = {"text": req.text, "output_ids": req.output_ids, "meta_info": _meta_info(req)}
                return [b"data: " + _dumps(out) + b"\n\n"]

            return await _stream(state, request, reqs[0], chunks)

        for req in reqs:
            state.in_flight.add(req)
        try:
            await asyncio.gather(*(_run_to_end(state, req) for req in reqs))
        finally:
            for req in reqs:
                state.in_flight.discard(req)
        outs = [
            {"text": r.text, "output_ids": r.output_ids, "meta_info": _meta_info(r)} for r in reqs
        ]
        return await _send_and_count(state, request, _json(outs if batch else outs[0]))

    # --- OpenAI-compatible ----------------------------------------------------

    def usage(req: GenRequest) -> dict:
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens,
            # UsageProcessor: the cached tokens only with --enable-cache-report
            "prompt_tokens_details": ({"cached_tokens": req.cached_tokens}
                                      if state.args.get("enable_cache_report") else None),
            "reasoning_tokens": 0,
            "synthetic": True,
        }

    def finish(req: GenRequest) -> str | None:
        if not req.finished:
            return None
        return "length" if req.finish_reason.get("type") == "length" else "stop"

    async def openai(request, chat: bool):
        try:
            body = await _body(request)
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages:
                    raise ValueError("messages must be a non-empty list")
                prompt = "".join(
                    f"<s>{m.get('role', 'user')} : {_content_text(m.get('content'))}</s>"
                    for m in messages if isinstance(m, dict)
                ) + "<s>assistant :"
                max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
                max_tokens = DEFAULT_MAX_NEW_TOKENS if max_tokens is None else max_tokens
                text, input_ids = prompt, None
            else:
                prompt = body.get("prompt")
                if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
                    text, input_ids = None, prompt
                elif isinstance(prompt, list) and len(prompt) == 1:
                    text, input_ids = prompt[0], None
                else:
                    text, input_ids = prompt, None
                max_tokens = body.get("max_tokens", OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS)
            req = _new_request(state, text, input_ids, max_tokens, body.get("ignore_eos", False),
                               stream=bool(body.get("stream")))
        except ValueError as exc:
            return _error(str(exc))
        created = int(time.time())
        model = body.get("model") or state.served_model_name
        kind = "chat.completion" if chat else "text_completion"

        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

            def chunks(r: GenRequest, sent: int) -> list[bytes]:
                delta_text = r.text_after(sent)
                if chat:
                    delta: dict = {"content": delta_text}
                    if sent == 0:
                        delta["role"] = "assistant"
                    choice = {"index": 0, "delta": delta, "logprobs": None,
                              "finish_reason": finish(r), "matched_stop": None}
                else:
                    choice = {"index": 0, "text": delta_text, "logprobs": None,
                              "finish_reason": finish(r), "matched_stop": None}
                out = [
                    b"data: " + _dumps({"id": r.rid, "object": f"{kind}.chunk" if chat else kind,
                                        "created": created, "model": model,
                                        "choices": [choice], "usage": None}) + b"\n\n"
                ]
                if r.finished and include_usage:
                    out.append(b"data: " + _dumps({"id": r.rid, "object": kind, "created": created,
                                                   "model": model, "choices": [],
                                                   "usage": usage(r)}) + b"\n\n")
                return out

            return await _stream(state, request, req, chunks)

        state.in_flight.add(req)
        try:
            await _run_to_end(state, req)
        finally:
            state.in_flight.discard(req)
        if chat:
            choice = {"index": 0,
                      "message": {"role": "assistant", "content": req.text,
                                  "reasoning_content": None, "tool_calls": None},
                      "logprobs": None, "finish_reason": finish(req), "matched_stop": None}
        else:
            choice = {"index": 0, "text": req.text, "logprobs": None,
                      "finish_reason": finish(req), "matched_stop": None}
        return await _send_and_count(
            state, request,
            _json({"id": req.rid, "object": kind, "created": created, "model": model,
                   "choices": [choice], "usage": usage(req), "synthetic": True}),
        )

    @routes.post("/v1/completions")
    async def completions(request):
        return await openai(request, chat=False)

    @routes.post("/v1/chat/completions")
    async def chat_completions(request):
        return await openai(request, chat=True)

    app.add_routes(routes)
    return app


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
