"""Generation backends behind one interface: transformers (CPU/GPU, the default), vLLM (GPU) and any
OpenAI-compatible server (vLLM, llama.cpp, TGI, ``transformers serve``, :mod:`elical.generation.serve`).

Every backend has ``generate(prompts, keys, seed=0, n_samples=None) -> list[Generation]`` (greedy answer with
per-token log-probs + N sampled answers per prompt, each ending at the end of its first line), plus the attributes
``tokenizer`` (for :func:`elical.generation.base.build_prompt`; may be None for an endpoint), ``decoding`` and
``supports_hidden_states``. Records made from any backend have the same fields; a prompt's samples depend only on
the seed and its key. The transformers decoder returns the last prompt token's hidden states from its prefill
(``generate(..., hidden_layers=...)``); neither vLLM nor an endpoint returns them, so with those the features come
from a separate transformers pass (:func:`elical.generation.features.extract_hidden_states`). Decoding follows Ni et
al. (2025, Sec. 4.1).
"""

from __future__ import annotations

import math
from typing import Sequence

from elical.generation.base import DecodingConfig, Generation, seed_for
from elical.generation.openai_client import DEFAULT_CONCURRENCY, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, \
    EndpointError, OpenAIClient

__all__ = ["make_generator", "transformers_generator", "vllm_generator", "openai_generator", "VLLMGenerator",
           "OpenAIGenerator", "EndpointError", "parse_vllm_args", "check_vllm_options"]

def make_generator(backend: str, model, tokenizer=None, decoding: DecodingConfig = DecodingConfig(), **kw):
    """A generator for ``backend``, a name of :data:`elical.generation.BACKENDS`: ``"transformers"`` | ``"vllm"`` |
    ``"openai"``.

    transformers gives a :class:`elical.generation.prefix_sharing.TransformersGenerator` (the batched, prefix-shared
    decoder).

    ``model``: transformers — a loaded causal LM or a name for :func:`elical.generation.models.load_model` (then
    ``device`` and ``dtype`` may be given in ``kw``); vllm — a Hugging Face id or local directory (the default name
    ``smollm2-135m-instruct`` resolves to its cached checkpoint), ``kw`` goes to ``vllm.LLM`` (e.g.
    ``tensor_parallel_size=4``); openai — the model name the server serves, ``kw`` must hold ``base_url`` and may
    hold ``api_key``, ``endpoint``, ``max_concurrency``, ``max_retries``, ``timeout``, ``send_top_k``,
    ``require_logprobs``.
    Raises ValueError for an unknown backend, ImportError when vllm is asked for but not installed.
    """
    from elical.generation import BACKENDS

    return BACKENDS[backend].load()(model, tokenizer, decoding, **kw)


def transformers_generator(model, tokenizer=None, decoding: DecodingConfig = DecodingConfig(), **kw):
    """The transformers backend of :func:`make_generator`."""
    if isinstance(model, str):
        from elical.generation.models import load_model

        model, tokenizer = load_model(model, device=kw.pop("device", "cpu"), dtype=kw.pop("dtype", "auto"))
    if tokenizer is None:
        raise ValueError("the transformers backend needs the tokenizer of the model")
    if kw:
        raise ValueError(f"unexpected options for the transformers backend: {sorted(kw)}")
    from elical.generation.prefix_sharing import TransformersGenerator

    return TransformersGenerator(model, tokenizer, decoding)


def vllm_generator(model, tokenizer=None, decoding: DecodingConfig = DecodingConfig(), **kw):
    """The vllm backend of :func:`make_generator`."""
    return VLLMGenerator(model, tokenizer=tokenizer, decoding=decoding, **kw)


def openai_generator(model, tokenizer=None, decoding: DecodingConfig = DecodingConfig(), **kw):
    """The openai backend of :func:`make_generator`: any OpenAI-compatible server at ``base_url``."""
    if "base_url" not in kw:
        raise ValueError("the openai backend needs base_url (e.g. http://127.0.0.1:8000/v1)")
    return OpenAIGenerator(kw.pop("base_url"), model, tokenizer=tokenizer, decoding=decoding, **kw)


def _vllm_value(text: str):
    """``true``/``false`` -> bool, ``none``/``null`` -> None, integers -> int, other numbers -> float, JSON
    objects and lists (``{...}``, ``[...]``) -> dict / list, anything else -> the string itself."""
    import json

    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not valid JSON ({exc})") from None
    return text


def parse_vllm_args(items: Sequence[str] = (), tensor_parallel_size: int | None = None) -> dict:
    """Keyword arguments for ``vllm.LLM`` from ``--tensor-parallel-size`` and repeated ``--vllm-arg key=value``.

    Keys take ``-`` or ``_`` (``gpu-memory-utilization`` is ``gpu_memory_utilization``); values are parsed as in
    :func:`_vllm_value` (``enforce_eager=true``, ``max_model_len=4096``, ``gpu_memory_utilization=0.85``,
    ``dtype=bfloat16``, ``compilation_config={"level": 3}``). Returns a dict in the order given. Raises
    :class:`elical.records.InputError` (exit code 2) naming the option for an item without ``=``, a key that is no
    identifier or is given twice, ``model`` (elical passes it), or a tensor-parallel size below 1.
    """
    from elical.records import InputError

    out = {}
    if tensor_parallel_size is not None:
        if isinstance(tensor_parallel_size, bool) or not isinstance(tensor_parallel_size, int) \
                or tensor_parallel_size < 1:
            raise InputError("--tensor-parallel-size", None, "--tensor-parallel-size",
                             f"expected a positive integer (GPUs per model copy), got {tensor_parallel_size!r}")
        out["tensor_parallel_size"] = tensor_parallel_size
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise InputError("--vllm-arg", None, "--vllm-arg", f"expected key=value (e.g. gpu_memory_utilization="
                             f"0.85), got {item!r}")
        if key == "model":
            raise InputError("--vllm-arg", None, key, "the model is --model, not a vLLM option")
        if key in out:
            raise InputError("--vllm-arg", None, key, "given twice (--tensor-parallel-size sets "
                             "tensor_parallel_size)" if key == "tensor_parallel_size" else "given twice")
        try:
            out[key] = _vllm_value(text)
        except ValueError as exc:
            raise InputError("--vllm-arg", None, key, str(exc)) from None
    return out


def _type_text(annotation) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


# annotations whose every word is one of these are checked against the value's type
_SIMPLE_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "None": type(None)}


def check_vllm_options(options: dict) -> dict:
    """Check ``options`` against the installed vLLM before anything is written: every key must be a parameter of
    ``vllm.LLM`` or a field of ``vllm.EngineArgs``, and a value must have the field's simple type (int, float,
    bool, str or None, as its annotation says; an int is a valid float). Returns ``options``.

    Raises :class:`elical.records.InputError` (exit code 2) for vLLM not installed, an unknown key (naming the
    closest known ones) or a value of the wrong type; other constraints (e.g. more GPUs than present) are vLLM's
    own checks, when the engine starts."""
    import dataclasses
    import difflib
    import inspect
    import re

    from elical.records import InputError

    try:
        import vllm
    except ImportError:
        raise InputError("--backend", None, "--backend", "the vllm backend needs vLLM on a GPU machine: "
                         "pip install 'elical[vllm]'") from None
    fields = {}
    engine_args = getattr(vllm, "EngineArgs", None)
    if engine_args is not None and dataclasses.is_dataclass(engine_args):
        fields = {f.name: _type_text(f.type) for f in dataclasses.fields(engine_args)}
    try:
        params = inspect.signature(vllm.LLM.__init__).parameters
    except (TypeError, ValueError):
        params = {}
    known = {**fields, **{k: _type_text(p.annotation) for k, p in params.items()
                          if k != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}}
    if not known:
        return options  # nothing to check against
    for key, value in options.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3)
            raise InputError("--vllm-arg", None, key, "not an option of vllm.LLM / vllm.EngineArgs"
                             + (f" (did you mean {', '.join(close)}?)" if close else ""))
        text = known[key].replace("typing.", "").replace("builtins.", "")
        words = re.findall(r"[A-Za-z_]\w*", text)
        words = [w for w in words if w not in ("Optional", "Union")] + (["None"] if "Optional" in words else [])
        if not words or not set(words) <= set(_SIMPLE_TYPES):
            continue
        allowed = tuple(_SIMPLE_TYPES[w] for w in words) + ((int,) if "float" in words else ())
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
            raise InputError("--vllm-arg", None, key, f"expected {' or '.join(words)} (vLLM's type {known[key]}), "
                             f"got {value!r}")
    return options


def _cut_answer(text: str, tokens: list, logprobs: list) -> tuple[list, list]:
    """Tokens and log-probs of the answer's first line: up to the first token containing a newline and none past
    the end of ``text`` (servers may report the stop or EOS token that the text leaves out)."""
    target = len(text.split("\n")[0].strip())
    keep, joined = 0, ""
    for tok in tokens:
        piece = tok if isinstance(tok, str) else ""
        if "\n" in piece or len(joined.strip()) >= target:
            break
        keep += 1
        joined += piece
    return list(tokens[:keep]), [float(x) for x in logprobs[:keep]]


def _generation(greedy: tuple[str, list, list], samples: list[tuple[str, list, list]],
                have_logprobs: bool) -> Generation:
    """A :class:`Generation` from (text, tokens, log-probs) triples; empty log-prob lists when there are none."""
    return Generation(
        greedy_response=greedy[0].split("\n")[0].strip(), greedy_tokens=greedy[1], greedy_logprobs=greedy[2],
        sampling_response=[s[0].split("\n")[0].strip() for s in samples],
        sampling_cumulative_logprobs=[float(math.fsum(s[2])) for s in samples] if have_logprobs else [],
        sampling_num_tokens=[len(s[2]) for s in samples] if have_logprobs else [])


class VLLMGenerator:
    """Greedy + N samples with vLLM (GPU), one ``LLM.generate`` call per batch.

    Per batch the prompts go in twice: once with ``SamplingParams(temperature=0, logprobs=1)`` (greedy, the
    chosen token's log-prob) and once with ``SamplingParams(n=N, temperature, top_p, top_k, logprobs=0, seed)``
    (the sampled tokens' log-probs), both ``max_tokens=max_new_tokens`` and ``stop=["\\n"]``. Prefix caching
    (on by default here) lets the sampled requests reuse the greedy request's prompt KV cache. vLLM returns
    log-probs of the raw model distribution by default (``logprobs_mode="raw_logprobs"``), like the transformers
    backend. ``llm_kwargs`` go to ``vllm.LLM`` unchanged: ``tensor_parallel_size``, ``gpu_memory_utilization``,
    ``dtype``, ``max_model_len`` ... vllm is imported only here; raises ImportError with the install command.
    """

    def __init__(self, model: str, tokenizer=None, decoding: DecodingConfig = DecodingConfig(), llm=None,
                 **llm_kwargs):
        try:
            import vllm
        except ImportError as exc:
            raise ImportError("the vllm backend needs vLLM on a GPU machine: pip install 'elical[vllm]'") from exc
        from elical.generation.models import resolve_model_path

        self.decoding = decoding
        if llm is None:
            llm_kwargs.setdefault("enable_prefix_caching", True)
            llm = vllm.LLM(model=resolve_model_path(model), **llm_kwargs)
        self.llm = llm
        self.tokenizer = tokenizer if tokenizer is not None else llm.get_tokenizer()
        self._SamplingParams = vllm.SamplingParams

    def generate(self, prompts: Sequence[str], keys: Sequence[str], seed: int = 0,
                 n_samples: int | None = None) -> list[Generation]:
        """Greedy + ``n_samples`` answers per prompt (see the class docstring). Each prompt's samples are seeded
        by ``seed`` and its key, so results do not depend on the batch. Returns one Generation per prompt."""
        d = self.decoding
        n = d.n_samples if n_samples is None else n_samples
        sp = self._SamplingParams
        common = dict(max_tokens=d.max_new_tokens, stop=["\n"])
        params = [sp(n=1, temperature=0.0, logprobs=1, **common)] * len(prompts)
        if n:
            params += [sp(n=n, temperature=d.temperature, top_p=d.top_p, top_k=d.top_k if d.top_k > 0 else -1,
                          logprobs=0, seed=seed_for(seed, k), **common) for k in keys]
        outs = self.llm.generate(list(prompts) * (2 if n else 1), params, use_tqdm=False)
        results = []
        for i in range(len(prompts)):
            greedy = self._answer(outs[i].outputs[0])
            samples = [self._answer(o) for o in outs[len(prompts) + i].outputs] if n else []
            results.append(_generation(greedy, samples, True))
        return results

    def _answer(self, out) -> tuple[str, list, list]:
        ids = list(out.token_ids)
        lps = [step[t].logprob for t, step in zip(ids, out.logprobs or [])]
        pieces = [self.tokenizer.decode([t]) for t in ids]
        _, lps = _cut_answer(out.text, pieces, lps)
        return out.text, self.tokenizer.convert_ids_to_tokens(ids[:len(lps)]), lps


class OpenAIGenerator:
    """Greedy + N samples from an OpenAI-compatible server over HTTP, through
    :class:`elical.generation.openai_client.OpenAIClient` (the ``openai`` package).

    ``base_url``: e.g. ``http://127.0.0.1:8000/v1``; ``model``: the served model name; ``tokenizer``: used only to
    build chat-templated prompts for ``/v1/completions`` (None: the plain instruction prompt).
    ``endpoint``: ``"completions"`` (the default; the prompt text is sent as is, so it must carry the chat
    template — the same prompt the transformers backend sees) or ``"chat"`` (``/v1/chat/completions``; the
    prompt is sent as one user message and the server applies its own template). Per prompt: one greedy request
    (temperature 0, ``logprobs``) and one sampling request with ``n`` = N (``samples_per_request="n"``) or N
    requests of n = 1 (``"single"``, for servers without ``n``, e.g. llama.cpp); a server that answers ``n``
    with fewer choices is asked again one sample at a time. ``seed`` goes to the server per request (derived from
    the run seed and the key); whether sampled answers repeat depends on the server honouring it.
    ``require_logprobs`` (default True): a reply without log-probs is an :class:`EndpointError` (records without
    them cannot give Prob / N-Prob); False gives empty log-prob lists instead. A choice that carries
    ``"elical": {"abstained": true}`` (an ``elical serve`` that abstained instead of answering) is always an
    error: its text is no answer of the model. Both are raised before :meth:`generate` returns, so nothing of
    the batch is written. At most ``max_concurrency`` requests are in flight; ``timeout`` (seconds) and
    ``max_retries`` (connection errors, timeouts, 408/409/429 and 5xx, exponential back-off) are the client's;
    then, or on another 4xx, :class:`EndpointError` names the URL. ``send_top_k``: send the non-OpenAI
    fields ``top_k`` and, so that llama.cpp's server samples as the paper does (its defaults are min-p 0.05 and a
    repeat penalty of 1.1, on greedy requests too), ``min_p=0`` and ``repeat_penalty=1`` (vLLM, llama.cpp, TGI
    accept or ignore them; set False for servers that reject unknown fields).
    """

    supports_hidden_states = False

    def __init__(self, base_url: str, model: str, tokenizer=None, decoding: DecodingConfig = DecodingConfig(), *,
                 api_key: str | None = None, endpoint: str = "completions", samples_per_request: str = "n",
                 max_concurrency: int = DEFAULT_CONCURRENCY, max_retries: int = DEFAULT_MAX_RETRIES,
                 timeout: float = DEFAULT_TIMEOUT, send_top_k: bool = True, require_logprobs: bool = True):
        if endpoint not in ("completions", "chat"):
            raise ValueError(f"endpoint must be 'completions' or 'chat', got {endpoint!r}")
        if samples_per_request not in ("n", "single"):
            raise ValueError(f"samples_per_request must be 'n' or 'single', got {samples_per_request!r}")
        self.client = OpenAIClient(base_url, api_key, timeout=timeout, max_retries=max_retries,
                                   concurrency=max_concurrency)
        self.base_url, self.model, self.tokenizer, self.decoding = base_url.rstrip("/"), model, tokenizer, decoding
        self.endpoint, self.samples_per_request = endpoint, samples_per_request
        self.send_top_k, self.require_logprobs = send_top_k, require_logprobs

    @property
    def url(self) -> str:
        return f"{self.base_url}/{'chat/completions' if self.endpoint == 'chat' else 'completions'}"

    def generate(self, prompts: Sequence[str], keys: Sequence[str], seed: int = 0,
                 n_samples: int | None = None) -> list[Generation]:
        """Greedy + ``n_samples`` answers per prompt (see the class docstring); one Generation per prompt, in
        order. Raises :class:`EndpointError` when the server is down, rejects a request, abstains, or gives no
        log-probs while they are required."""
        d = self.decoding
        n = d.n_samples if n_samples is None else n_samples
        base = {"max_tokens": d.max_new_tokens, "stop": ["\n"]}
        if self.send_top_k:  # llama.cpp's server applies min-p 0.05 and a repeat penalty of 1.1 unless told
            base.update(min_p=0.0, repeat_penalty=1.0)
        sample = dict(base, temperature=d.temperature, top_p=d.top_p)
        if self.send_top_k and d.top_k > 0:
            sample["top_k"] = d.top_k
        jobs = [(p, dict(base, temperature=0.0, n=1)) for p in prompts]
        for p, k in zip(prompts, keys):
            s = seed_for(seed, k) % (2 ** 31)
            if n and self.samples_per_request == "n":
                jobs.append((p, dict(sample, n=n, seed=s)))
            elif n:
                jobs += [(p, dict(sample, n=1, seed=(s + j) % (2 ** 31))) for j in range(n)]
        answers = self.client.map(lambda job: self._choices(*job), jobs)
        greedy, rest = answers[:len(prompts)], answers[len(prompts):]
        per = 1 if self.samples_per_request == "n" else n
        results = []
        for i, p in enumerate(prompts):
            samples = [c for got in rest[i * per:(i + 1) * per] for c in got] if n else []
            if len(samples) < n:  # the server ignored n: ask for the rest one at a time
                s = seed_for(seed, keys[i]) % (2 ** 31)
                extra = self.client.map(lambda j: self._choices(p, dict(sample, n=1, seed=(s + j) % (2 ** 31))),
                                        range(len(samples), n))
                samples += [c for got in extra for c in got]
            have = greedy[i][0][3] and all(s[3] for s in samples)
            results.append(_generation(greedy[i][0][:3], [s[:3] for s in samples[:n]], have))
        return results

    def complete(self, prompts: Sequence[str], max_tokens: int = 64, temperature: float = 0.0,
                 stop: Sequence[str] | None = None) -> list[str]:
        """One completion text per prompt (greedy by default), e.g. for an LLM judge; bounded concurrency and
        retries as in :meth:`generate`. Raises :class:`EndpointError`."""
        body = {"max_tokens": max_tokens, "temperature": temperature, "n": 1}
        if stop:
            body["stop"] = list(stop)
        return [got[0][0] for got in self.client.map(lambda p: self._choices(p, body, logprobs=False), list(prompts))]

    def _choices(self, prompt: str, body: dict, logprobs: bool = True) -> list[tuple[str, list, list, bool]]:
        """(text, tokens, log-probs, server gave log-probs) per choice, in choice order."""
        body = dict(body, model=self.model)
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
            if logprobs:
                body["logprobs"] = True
        else:
            body["prompt"] = prompt
            if logprobs:
                body["logprobs"] = 1
        reply = self.client.create(self.endpoint, body)
        out = []
        for c in sorted(reply.get("choices") or [], key=lambda c: c.get("index") or 0):
            if isinstance(c.get("elical"), dict) and c["elical"].get("abstained"):
                raise EndpointError(f"{self.url} abstained instead of answering (confidence "
                                    f"{c['elical'].get('confidence')} below its threshold "
                                    f"{c['elical'].get('threshold')}); its text is no answer of the model: start "
                                    f"the server without --abstain-below, or send elical.abstain_below = null")
            text = (c.get("message") or {}).get("content") or "" if self.endpoint == "chat" else c.get("text") or ""
            tokens, lps = _parse_logprobs(c.get("logprobs"))
            have = lps is not None and all(x is not None for x in lps)
            if logprobs and not have and self.require_logprobs:
                raise EndpointError(f"{self.url} answered without log-probs; they are needed for Prob / N-Prob "
                                    f"(use a server that returns them, e.g. vLLM or elical serve without "
                                    f"--no-logprobs)")
            if have:
                tokens, lps = _cut_answer(text, tokens, lps)
            out.append((text, tokens if have else [], lps if have else [], have))
        if not out:
            raise EndpointError(f"{self.url}: the reply has no choices: {str(reply)[:200]}")
        return out


def _parse_logprobs(lp) -> tuple[list, list | None]:
    """(token strings, log-probs) from a completions (``tokens``/``token_logprobs``) or chat (``content``) log-prob
    block; log-probs None when the server gave none."""
    if not lp:
        return [], None
    if isinstance(lp, dict) and lp.get("token_logprobs") is not None:
        return list(lp.get("tokens") or []), list(lp["token_logprobs"])
    content = lp.get("content") if isinstance(lp, dict) else None
    if content:
        return [c.get("token", "") for c in content], [c.get("logprob") for c in content]
    return [], None
