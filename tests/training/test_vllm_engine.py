"""The vLLM engine: runs only where vllm and a CUDA GPU exist (skipped elsewhere)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


def test_vllm_generate_sleep_and_weight_push(micro_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.engines import GenSettings
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
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    gens = engine.generate([prompt] * 4, GenSettings(1.0, 1.0, 0, 16), seed=0)
    assert len(gens) == 4 and all(len(g.token_ids) == len(g.logprobs) > 0 for g in gens)
    engine.sleep()
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    engine.update_weights(model.state_dict().items())  # wakes up, loads, resets the prefix cache
    again = engine.generate([prompt], GenSettings(1.0, 1.0, 0, 16), seed=0)
    assert again[0].token_ids
