"""The vLLM engine: runs only where vllm and a CUDA GPU exist (skipped elsewhere; run by
scripts/gpu-check.sh vllm covers the engine beside the trainer)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


def _gap(engine, model, prompts, pad_id) -> float:
    """Mean |engine's log-prob - model's| over the tokens the engine samples."""
    from training.batch import build_rows, gather_response
    from training.engines import GenSettings
    from training.loss import token_logprobs

    gens = engine.generate(prompts, GenSettings(1.0, 1.0, 0, 16), seed=3)
    assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in gens)
    ids, attn, mask = build_rows(prompts, [g.token_ids for g in gens], pad_id)
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids.cuda(), attn.cuda())
    ours = gather_response(logp.float().cpu(), mask)
    gaps = [
        abs(a - b) for g, row in zip(gens, ours, strict=True) for a, b in zip(g.logprobs, row, strict=True)
    ]
    return sum(gaps) / len(gaps)


def test_vllm_generate_sleep_and_weight_push(micro_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.engines.vllm_engine import VLLMEngine

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    engine = VLLMEngine(str(micro_model_dir), dtype="float32", gpu_memory_utilization=0.2)
    text = tok.apply_chat_template(
        [
            {
                "role": "user",
                "content": "Tic-tac-toe, you are x.\n...\n...\n...\nReply <answer>x(row,col)</answer>, 0-2.",
            }
        ],
        add_generation_prompt=True,
        tokenize=False,
        enable_thinking=False,
    )
    prompts = [tok(text, add_special_tokens=False)["input_ids"]] * 4
    base = AutoModelForCausalLM.from_pretrained(micro_model_dir).cuda()
    assert _gap(engine, base, prompts, tok.pad_token_id) < 0.05  # the engine is the checkpoint
    engine.sleep()
    # a visibly different model: its log-probs are far from the checkpoint's
    sharp = AutoModelForCausalLM.from_pretrained(micro_model_dir).cuda()
    with torch.no_grad():
        sharp.lm_head.weight.mul_(40.0)
    engine.update_weights(sharp.state_dict().items())  # wakes up, loads one by one, resets the cache
    to_sharp = _gap(engine, sharp, prompts, tok.pad_token_id)
    assert to_sharp < 0.05 and _gap(engine, base, prompts, tok.pad_token_id) > 10 * max(to_sharp, 0.01)
