"""One thread owns the model; concurrent requests queue jobs that it runs in batches (the server's scheduler).

Whenever the thread is free it takes every queued job: all confidence-scoring jobs go into one forward pass, and
generation jobs with the same decoding parameters (temperature, top-p, top-k, max tokens, n, one-line or not) go
into one :class:`elical.generation.prefix_sharing.TransformersGenerator` call (at most ``max_prompts`` prompts).
Each prompt keeps its own (seed, key), so its samples are the ones it would get alone (the decoder draws a
prompt's randomness from ``seed_for(seed, key)`` only). A job whose client has gone (:meth:`Job.cancel`) is
skipped when its turn comes, and a batch whose jobs have all gone stops between two decoding steps.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass

from elical.generation.base import DecodingConfig

__all__ = ["GenParams", "Job", "ModelWorker", "Cancelled"]


class Cancelled(RuntimeError):
    """The job was cancelled (its client went away) before it finished."""


@dataclass(frozen=True)
class GenParams:
    """Decoding parameters that must be equal for prompts to share one decoder call. ``max_tokens`` in tokens;
    ``n`` answers per prompt (with ``temperature == 0``: one greedy answer); ``one_line``: stop at the first
    newline (else only EOS or ``max_tokens`` end an answer)."""

    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    n: int
    one_line: bool

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class Job:
    """A unit of work for :class:`ModelWorker`; ``future`` gets its result. ``cancel()`` marks it abandoned."""

    def __init__(self, kind: str, **payload):
        self.kind, self.payload = kind, payload
        self.future: Future = Future()
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()


def rows_generator(model, tokenizer, decoding: DecodingConfig, one_line: bool = True):
    """A TransformersGenerator that also keeps every decoded row's (raw text, token strings, log-probs, token ids)
    in ``rows``, in row order (prompt i's greedy row at ``i * (n + 1)``, its samples after it). ``one_line``
    False: the newline is no stop token and the text is not cut at it."""
    from elical.generation.prefix_sharing import TransformersGenerator

    class RowsGenerator(TransformersGenerator):
        def generate(self, *args, **kwargs):
            self.rows = []
            return super().generate(*args, **kwargs)

        def _stop_token_ids(self):
            ids = super()._stop_token_ids()
            newline = self.tokenizer.encode("\n", add_special_tokens=False)
            return ids if one_line or len(newline) != 1 else [i for i in ids if i != newline[0]]

        def _finish(self, ids, lps):
            out = super()._finish(ids, lps)
            raw = self.tokenizer.decode(ids, skip_special_tokens=True)  # unstripped, as sent
            self.rows.append((raw.split("\n")[0] if one_line else raw,
                              [self.tokenizer.decode([t]) for t in ids], list(lps), list(ids)))
            return out

    return RowsGenerator(model, tokenizer, decoding)


class ModelWorker:
    """The thread that runs every model call of a server (module docstring). ``confidence``: an object with
    ``predict(questions) -> ndarray (n,)`` or None. ``max_prompts``: prompts per decoder call (>= 1)."""

    def __init__(self, model, tokenizer, confidence=None, max_prompts: int = 32):
        if max_prompts < 1:
            raise ValueError(f"max_prompts must be >= 1, got {max_prompts!r}")
        self.model, self.tokenizer, self.confidence, self.max_prompts = model, tokenizer, confidence, max_prompts
        self._queue: queue.Queue = queue.Queue()
        self.batches_: list[int] = []  # prompts per decoder call, in order (how much batching happened)
        self._thread = threading.Thread(target=self._loop, name="elical-model", daemon=True)
        self._thread.start()

    def score(self, questions: list[str]) -> Job:
        """Queue the confidence of each question; the result is an ndarray of shape (len(questions),)."""
        return self._put(Job("score", questions=list(questions)))

    def generate(self, prompts: list[str], keys: list[str], seed: int, params: GenParams) -> Job:
        """Queue the answers of ``prompts``; the result is one list of rows per prompt (greedy: 1 row, else
        ``n``), a row being (raw text, token strings, log-probs, token ids)."""
        return self._put(Job("generate", prompts=list(prompts), keys=list(keys), seed=seed, params=params))

    def close(self) -> None:
        self._queue.put(None)

    def _put(self, job: Job) -> Job:
        self._queue.put(job)
        return job

    def _loop(self) -> None:
        while True:
            jobs = [self._queue.get()]
            while True:
                try:
                    jobs.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            live = []
            for job in jobs:
                if job is None:
                    continue
                if job.cancelled.is_set():
                    job.future.set_exception(Cancelled("the client went away"))
                elif job.future.set_running_or_notify_cancel():
                    live.append(job)
            scores = [j for j in live if j.kind == "score"]
            if scores:
                self._run(scores, self._score)
            groups: dict[GenParams, list[Job]] = {}
            for job in live:
                if job.kind == "generate":
                    groups.setdefault(job.payload["params"], []).append(job)
            for params, group in groups.items():
                chunk, size = [], 0
                for job in group + [None]:
                    n = 0 if job is None else len(job.payload["prompts"])
                    if chunk and (job is None or size + n > self.max_prompts):
                        self._run(chunk, lambda c, p=params: self._generate(c, p))
                        chunk, size = [], 0
                    if job is not None:
                        chunk.append(job)
                        size += n
            if None in jobs:
                return

    @staticmethod
    def _run(jobs: list[Job], fn) -> None:
        jobs = [j for j in jobs if not j.cancelled.is_set() or j.future.set_exception(Cancelled("gone"))]
        if not jobs:
            return
        try:
            results = fn(jobs)
        except Exception as exc:  # the requests' own problem (or a cancelled batch): each of them gets it
            for job in jobs:
                job.future.set_exception(exc)
            return
        for job, result in zip(jobs, results):
            job.future.set_result(result)

    def _score(self, jobs: list[Job]) -> list:
        questions = [q for j in jobs for q in j.payload["questions"]]
        confidence = self.confidence.predict(questions)
        out, start = [], 0
        for job in jobs:
            out.append(confidence[start:start + len(job.payload["questions"])])
            start += len(job.payload["questions"])
        return out

    def _generate(self, jobs: list[Job], params: GenParams) -> list:
        from elical.generation.prefix_sharing import DecodingCancelled

        prompts = [p for j in jobs for p in j.payload["prompts"]]
        keys = [k for j in jobs for k in j.payload["keys"]]
        seeds = [j.payload["seed"] for j in jobs for _ in j.payload["prompts"]]
        decoding = DecodingConfig(n_samples=0 if params.greedy else params.n, temperature=params.temperature or 1.0,
                                  top_p=params.top_p, top_k=max(params.top_k, 0), max_new_tokens=params.max_tokens,
                                  batch_size=len(prompts))
        gen = rows_generator(self.model, self.tokenizer, decoding, params.one_line)
        gen.should_stop = lambda: all(j.cancelled.is_set() for j in jobs)
        try:
            gen.generate(prompts, keys, seed=seeds)
        except DecodingCancelled:
            raise Cancelled("every client of this batch went away") from None
        self.batches_.append(len(prompts))
        per = 1 if params.greedy else params.n + 1
        out, start = [], 0
        for job in jobs:
            rows = []
            for i in range(start, start + len(job.payload["prompts"])):
                rows.append(gen.rows[i * per:i * per + 1] if params.greedy else gen.rows[i * per + 1:(i + 1) * per])
            out.append(rows)
            start += len(job.payload["prompts"])
        return out
