"""A scripted rollout engine that plays a random legal move in any prompt style.

It reads the legal actions from the prompt text ("LEGAL ACTIONS:" of the reference style, or
"Legal actions:" of ours), picks one with random.Random(seed, prompt index), and answers in the
form the prompt's end asks for: after a forced "<think>\\n" a short thinking of up to
`think_words` words, then the answer; after a forced "<answer>" the rest of the answer; else
"<answer>ACTION</answer>". Replies are the tokenizer's own tokens of that text plus the
end-of-turn token, as a model that ends its turn would give them, so a growing chat re-renders
them token for token (what trajectory rows need; training/rows.py).
"""

from __future__ import annotations

import random
import re
from typing import Any

from training.engines import Generation, GenSettings


class LegalMoves:
    def __init__(self, tok: Any, think_words: int = 0):
        self.tok = tok
        self.think_words = think_words
        self.calls = 0

    def update_weights(self, named: Any) -> None:
        pass

    def shares_weights_with(self, model: Any) -> bool:
        return False

    def sleep(self) -> None:
        pass

    def wake_up(self) -> None:
        pass

    def reply(self, prompt: list[int], rng: random.Random) -> list[int]:
        text = self.tok.decode(prompt)
        ref = re.findall(r"LEGAL ACTIONS:\n(.*?)\.\n", text, re.S)
        legal = ref[-1].split(", ") if ref else re.findall(r"Legal actions: (.*)", text)[-1].split(", ")
        action = rng.choice(legal)
        words = " ".join(
            rng.choice(("hmm", "so", "the", "move")) for _ in range(rng.randint(0, self.think_words))
        )
        if text.endswith("<think>\n"):
            reply = f"{words}\n</think><answer>{action}</answer>"
        elif text.endswith("<answer>"):
            reply = f"{action}</answer>"
        else:
            reply = f"<answer>{action}</answer>"
        return self.tok(reply, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]

    def generate(
        self, prompts: list[list[int]], settings: GenSettings, seed: int, max_tokens: list[int] | None = None
    ) -> list[Generation]:
        self.calls += 1
        out = []
        for i, p in enumerate(prompts):
            ids = self.reply(p, random.Random(seed * 1000 + i))
            out.append(Generation(ids, [-0.1] * len(ids), True))
        return out
