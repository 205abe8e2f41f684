"""benchmarks/gpu_check.py on the CPU with tiny models: every section prints numbers, and in float32 the
prefix-sharing decoder's greedy answers equal Hugging Face generate's (an independent decoder) on the same
random-weight models."""
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
ARCHS = ("smollm2-135m-arch", "llama-3.2-1b-arch")
NUM = r"([0-9][0-9,]*\.?[0-9]*)"


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_gpu_check_tiny_on_cpu_prints_every_section_with_numbers(capsys, load_script):
    module = load_script(SCRIPT)
    assert module.main(["--device", "cpu", "--tiny"]) == 0
    out = capsys.readouterr().out
    sections = re.findall(r"^== (.+) ==$", out, flags=re.M)
    assert sections[:4] == ["device", "decoder: prefix sharing vs HF generate", "feature pass (extract_hidden_states)",
                            "LoRA head training (LoRAHead)"] and sections[-1].startswith("done in")
    assert _number(re.search(rf"dense matmul 2048 x 2048: fp32 {NUM} GFLOP/s", out).group(1)) > 0
    assert "RANDOM weights" in out and "max_new_tokens" in out
    for arch in ARCHS:
        n_params = re.search(rf"^{arch}: {NUM} M parameters, 2 layers", out, flags=re.M)
        assert n_params and _number(n_params.group(1)) > 1
        dec = re.search(rf"^{arch}: 4 questions x \(greedy \+ 3 samples\), max_new_tokens 6, batch 4: prefix-sharing "
                        rf"{NUM} questions/s \({NUM} answer tokens/s, {NUM} tokens/answer\); HF generate {NUM} "
                        rf"questions/s \({NUM} answer tokens/s, {NUM} tokens/answer\); speed-up {NUM}x; greedy "
                        rf"answers equal to HF generate's: (\d+)/4$", out, flags=re.M)
        assert dec, out
        values = [_number(v) for v in dec.groups()]
        assert min(values[:7]) > 0 and values[2] <= 6 and values[5] <= 6
        assert values[7] == 4  # float32: the same greedy tokens as transformers' own generate
        feat = re.search(rf"^{arch}: 8 prompts, batch 4: {NUM} prompts/s \({NUM} prompt tokens/s", out, flags=re.M)
        assert feat and _number(feat.group(1)) > 0 and _number(feat.group(2)) > _number(feat.group(1))
        for precision in ("bf16", "fp32"):
            lora = re.search(rf"^{arch}: {precision}: {NUM} questions/s in training \(8 prompts", out, flags=re.M)
            assert lora and _number(lora.group(1)) > 0, out
