"""Continuous batching for the in-process engine: one decode loop that sequences join and leave.

Why not one `model.generate` per batch (what the engine did before): a static batch runs until
its longest row ends (rows that finished early still take a step each time), every prompt is
left-padded to the longest one, a request that arrives mid-batch waits for the whole batch, and
the identical round-1 prompt of a debate's agents is computed once per agent. Here:

- Rows join between steps and leave the step their reply ends; a decode step computes exactly
  one new token per live row. Calls that join at one step are prefilled together, in forwards
  of similar uncached prompt length (padding at most a quarter of a forward's tokens, and none
  of it kept): on a CPU one forward over several prompts costs far less than one per prompt.
- Per-sequence KV cache, kept in one slab per layer, (rows, kv_heads, time, head_dim): live
  row i owns slab row i and its tokens sit at time [0, length_i). A step writes each row's new
  key/value at its own length and attends over [0, max length] with a mask that hides every
  row's unused tail; the slab rows are a view, never copied per step. Only attention sees that
  tail (masked, its softmax weight is exactly 0); the projections and MLP, most of a step's
  work, run on the live rows' new tokens alone. When a row leaves, the last live row moves
  into its place so the live rows stay 0..n-1.
- Memory is a budget, not the batch size: the slab holds at most `kv_budget_tokens` (rows x
  time). A call joins only while every live row, the joiner included, keeps room for
  min(its room left, RESERVE) more tokens; should the longest row still outgrow the budget, the
  row admitted last is preempted: it leaves the slab, waits first in line and, when it joins
  again, its prompt and the tokens it had are prefilled anew (recompute, as vLLM preempts), its
  sampler and generator kept, so its reply goes on as before.
- A prefix cache: a prompt's KV is kept per whole block of `PREFIX_BLOCK` tokens, looked up by
  a chained hash of the blocks (and checked token by token), so a prompt that starts with a
  cached prefix copies that KV and prefills only the rest. Bounded in tokens, least recently
  used out first. Counters: prompt tokens seen, tokens served from the cache.
- Sampling per row: each row's settings (temperature, top_k, top_p, min_p: the fields with a
  transformers keyword) become transformers' own logits warpers, in `generate`'s order; rows
  with equal settings are warped together, greedy rows take the argmax, and a seeded row draws
  from its own generator, so its text does not depend on its batch mates.

transformers' own continuous batching (transformers >= 5: `generate_batch`,
`init_continuous_batching`) runs on the CPU in fp32 and matches greedy `generate`, but one
manager samples or is greedy for all its requests, has no per-request min_p or seed, and ties
us to an API still moving between releases; this loop uses only the model's forward (with
`position_ids`, a 4D mask and a cache object with `update`), which transformers >= 4.56 have
(the engine's tests pass on 4.56.2 and 5.25).

The model's forward is called with a duck-typed cache (`_SlabCache`): attention layers call
`cache.update(key, value, layer_idx, ...)` and attend over what it returns. Models whose layers
need more than that (sliding-window layers, recurrent state) are not run here: see `supported`.
"""

from __future__ import annotations

import inspect
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mars_eval.models.threads import WIDE_FORWARD_TOKENS

PREFIX_BLOCK = 16  # tokens per prefix-cache block: a prefix is reused in whole blocks


def supported(lm: Any) -> str | None:
    """Why this loop cannot run `lm` (None: it can). The loop passes one 4D mask to every layer
    and keeps plain key/value per layer, so sliding-window or recurrent layers are refused."""
    config = lm.config
    layer_types = getattr(config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        return f"layer types {sorted(set(layer_types))}"
    if getattr(config, "use_sliding_window", False) and getattr(config, "sliding_window", None):
        return "sliding-window attention"
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder model"
    attn = getattr(config, "_attn_implementation", None) or "sdpa"
    if attn not in ("sdpa", "eager"):  # the loop's additive 4D mask is what these two take
        return f"attention implementation {attn!r}"
    params = inspect.signature(lm.forward).parameters
    if "position_ids" not in params or not ({"cache", "past_key_values"} & set(params)):
        return "forward takes no position_ids or cache"
    return None


def kv_bytes_per_token(lm: Any) -> int | None:
    """Bytes of KV one token takes across all layers (keys and values), from the model's config
    and dtype; None when the config does not say (the budget then cannot be applied)."""
    config = lm.config
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or (
        config.hidden_size // heads if heads and getattr(config, "hidden_size", None) else None
    )
    if not (isinstance(layers, int) and isinstance(kv_heads, int) and isinstance(head_dim, int)):
        return None
    element = next(lm.parameters()).element_size()
    return 2 * layers * kv_heads * head_dim * element


def _cache_keyword(lm: Any) -> str:
    # transformers 5.x renamed past_key_values to cache (the old name still works, with a warning)
    return "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"


class _SlabCache:
    """KV of the live rows, one slab per layer: keys[l] is (rows, kv_heads, time, head_dim).

    Before each forward the loop says where this forward writes (`for_decode`, `for_prefill`);
    each attention layer's `update` writes its new key/value there and returns the keys/values
    to attend over (a view of the slab)."""

    def __init__(self, rows: int, limit: int | None, rows_index: Any):
        self.rows_cap = rows
        self.limit = limit  # the model's positions: the time axis never grows past them
        self.rows_now = 0
        self.time_cap = 0
        self._want = (1, 64)  # (rows, time) asked for before the first forward made the slab
        self._rows_index = rows_index  # arange(rows) on the model's device
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self._write: tuple = ()

    # --- what the next forward writes -----------------------------------------------------
    def for_decode(self, lengths: Any, span: int) -> None:
        """Rows 0..n-1 each write one token at their own length; attend over [0, span)."""
        self._write = ("decode", lengths, span)

    def for_prefill(self, first: int, starts: list[int], counts: list[int], width: int, span: int) -> None:
        """Rows first.. write their prompts' uncached parts (row i: counts[i] tokens from
        starts[i], the last counts[i] of the forward's `width`, left-padded); attend over
        [0, span)."""
        self._write = ("prefill", first, starts, counts, width, span)

    def ensure(self, rows: int, time: int, capacity: int | None = None) -> None:
        """Hold `rows` rows of `time` tokens: each axis grows by doubling (rows up to the most
        live rows, time up to the model's positions) but never past `capacity` tokens (rows x
        time) beyond what is asked, so memory follows what is live."""
        if not self.keys:  # the first forward makes the slab (it learns the KV shape there)
            self._want = (max(self._want[0], rows), max(self._want[1], time))
            return
        if rows <= self.rows_now and time <= self.time_cap:
            return
        new_rows = self.rows_now
        if rows > self.rows_now:
            new_rows = min(max(rows, 2 * self.rows_now), self.rows_cap)
        new_time = self.time_cap if time <= self.time_cap else max(time, self._double(self.time_cap))
        if capacity:  # doubling stops at the budget: rows made for an earlier round shrink
            new_time = max(time, min(new_time, capacity // max(rows, 1)))
            new_rows = max(rows, min(new_rows, capacity // new_time))
        keep_rows, keep_time = min(self.rows_now, new_rows), min(self.time_cap, new_time)
        for store in (self.keys, self.values):
            for i, old in enumerate(store):
                grown = old.new_zeros((new_rows, old.shape[1], new_time, old.shape[3]))
                grown[:keep_rows, :, :keep_time] = old[:keep_rows, :, :keep_time]
                store[i] = grown
        self.rows_now, self.time_cap = new_rows, new_time

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for store in (self.keys, self.values) for t in store)

    def release(self) -> None:
        """Free the slab (no live rows): the next forward makes a new one."""
        self.keys, self.values = [], []
        self.rows_now = self.time_cap = 0
        self._want = (1, 64)

    def _double(self, n: int) -> int:
        return min(2 * n, self.limit) if self.limit else 2 * n

    # --- what attention layers call -------------------------------------------------------
    def update(self, key: Any, value: Any, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if layer_idx == len(self.keys):  # first forward: the slab takes the model's KV shape
            self._make_layer(key, value)
        ks, vs = self.keys[layer_idx], self.values[layer_idx]
        if self._write[0] == "decode":
            _, lengths, span = self._write
            rows = lengths.shape[0]
            index = self._rows_index[:rows]
            ks[index, :, lengths] = key[:, :, 0]  # row r's new token at time lengths[r]
            vs[index, :, lengths] = value[:, :, 0]
            return ks[:rows, :, :span], vs[:rows, :, :span]
        _, first, starts, counts, width, span = self._write
        for i, (start, count) in enumerate(zip(starts, counts, strict=True)):  # not the padding
            ks[first + i, :, start : start + count] = key[i, :, width - count :]
            vs[first + i, :, start : start + count] = value[i, :, width - count :]
        rows = slice(first, first + len(starts))
        return ks[rows, :, :span], vs[rows, :, :span]

    def _make_layer(self, key: Any, value: Any) -> None:
        """One layer's slab, shaped like `key` (..., kv_heads, time, head_dim)."""
        rows, time = self._want
        time = min(time, self.limit) if self.limit else time
        self.keys.append(key.new_zeros((rows, key.shape[-3], time, key.shape[-1])))
        self.values.append(value.new_zeros((rows, value.shape[-3], time, value.shape[-1])))
        self.rows_now, self.time_cap = rows, time

    def get_seq_length(self, layer_idx: int = 0) -> int:  # asked by some models; positions are ours
        return 0

    # --- rows -----------------------------------------------------------------------------
    def move_row(self, src: int, dst: int, length: int) -> None:
        for store in (self.keys, self.values):
            for s in store:
                s[dst, :, :length] = s[src, :, :length]

    def copy_in(self, row: int, kv: list[tuple[Any, Any]], length: int) -> None:
        """Put a cached prefix (per layer (key, value), each (kv_heads, >= length, head_dim))."""
        if not self.keys:  # released since the prefix was cached: make the slab like it
            for k, v in kv:
                self._make_layer(k, v)
        for layer, (k, v) in enumerate(kv):
            self.keys[layer][row, :, :length] = k[:, :length]
            self.values[layer][row, :, :length] = v[:, :length]

    def copy_out(self, row: int, length: int) -> list[tuple[Any, Any]]:
        pairs = zip(self.keys, self.values, strict=True)
        return [(k[row, :, :length].clone(), v[row, :, :length].clone()) for k, v in pairs]


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    kv: list[tuple[Any, Any]]
    hashes: list[int]


class PrefixCache:
    """Prompt KV by whole blocks of PREFIX_BLOCK tokens, bounded by `max_tokens`, LRU.

    Block j's key chains the hash of blocks 0..j, so a hit on block j means the whole prefix
    up to it matches (checked token by token against the entry, so a hash collision is a miss).
    An entry keeps its prompt's full blocks; a prompt whose blocks are all cached already adds
    nothing, one that extends a cached prefix is stored whole (the shared part twice: simple,
    and bounded by `max_tokens`)."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._by_hash: dict[int, tuple[int, int]] = {}  # chained block hash -> (entry id, tokens)
        self._next_id = 0
        self.tokens_held = 0

    @staticmethod
    def block_hashes(tokens: list[int]) -> list[int]:
        out, h = [], 0
        for j in range(len(tokens) // PREFIX_BLOCK):
            h = hash((h, tuple(tokens[j * PREFIX_BLOCK : (j + 1) * PREFIX_BLOCK])))
            out.append(h)
        return out

    def lookup(self, tokens: list[int], hashes: list[int]) -> tuple[list[tuple[Any, Any]] | None, int]:
        """(per-layer KV, tokens) of the longest cached whole-block prefix of `tokens`."""
        for j in range(len(hashes) - 1, -1, -1):
            hit = self._by_hash.get(hashes[j])
            if hit is None:
                continue
            entry_id, n = hit
            entry = self._entries[entry_id]
            if entry.tokens[:n] == tuple(tokens[:n]):
                self._entries.move_to_end(entry_id)
                return entry.kv, n
        return None, 0

    def add(self, tokens: list[int], hashes: list[int], kv: Callable[[int], list[tuple[Any, Any]]]) -> None:
        """Keep the full blocks of `tokens`, or as many leading ones as the cache holds (a long
        prompt's shared part, a system prompt or a game's rules, comes first); `kv(n)` gives
        their KV (called only when kept)."""
        hashes = hashes[: self.max_tokens // PREFIX_BLOCK]
        n = len(hashes) * PREFIX_BLOCK
        if n == 0 or hashes[-1] in self._by_hash:
            return
        while self.tokens_held + n > self.max_tokens:
            old_id, old = self._entries.popitem(last=False)
            self.tokens_held -= len(old.hashes) * PREFIX_BLOCK
            for h in old.hashes:
                if self._by_hash.get(h, (None,))[0] == old_id:
                    del self._by_hash[h]
        entry_id, self._next_id = self._next_id, self._next_id + 1
        self._entries[entry_id] = _Entry(tuple(tokens[:n]), kv(n), hashes)
        for j, h in enumerate(hashes):
            self._by_hash[h] = (entry_id, (j + 1) * PREFIX_BLOCK)
        self.tokens_held += n


@dataclass(eq=False)  # a row is itself: two calls with one prompt are two rows
class Sequence:
    """One request in the loop: its prompt ids, room for new tokens, settings and callback."""

    prompt: list[int]
    room: int  # most new tokens (already lowered to the context left)
    key: tuple  # the sampling settings that warp alike (`_group_key`)
    processors: Any  # a LogitsProcessorList, or None for greedy
    seed: int | None
    done: Callable[[list[int], str], None]  # (new tokens without the end token, finish reason)
    cancelled: Callable[[], bool] = lambda: False
    fail: Callable[[BaseException], None] = lambda exc: None  # answer the call with an error
    generated: list[int] = field(default_factory=list)
    length: int = 0  # tokens in this row's KV
    generator: Any = None
    order: int = 0  # when it was first admitted: the last admitted is preempted first

    def kv_tokens(self) -> list[int]:
        """What this row's KV holds once prefilled: the prompt, and after a preemption also
        the tokens it had generated but the last (the next step's input)."""
        return self.prompt + self.generated[:-1] if self.generated else self.prompt


PREFILL_PADDING = 0.25  # most share of a prefill forward's tokens that may be padding
PREFILL_TOKENS = 2048  # most tokens (padding included) one prefill forward computes: its
# activations and attention scores, not the batch, set the loop's peak memory
RESERVE = 256  # tokens of growth a joiner must leave every live row (or its room left, if less)


def _by_length(group: list[tuple]) -> list[list[tuple]]:
    """`group` (seq, hashes, kv, start) split into forwards of similar uncached lengths, longest
    first, so padding stays under PREFILL_PADDING of each forward's tokens (no prompt is padded
    to a much longer one) and a forward holds at most PREFILL_TOKENS tokens (a prompt longer
    than that goes alone)."""

    def count(item: tuple) -> int:
        return len(item[0].kv_tokens()) - item[3]

    parts: list[list[tuple]] = []
    for item in sorted(group, key=count, reverse=True):
        if parts:
            part = parts[-1]
            width, tokens = count(part[0]), sum(count(x) for x in part) + count(item)
            cells = width * (len(part) + 1)
            if cells <= PREFILL_TOKENS and cells - tokens <= PREFILL_PADDING * cells:
                part.append(item)
                continue
        parts.append([item])
    return parts


@dataclass
class LoopStats:
    """Counters the engine reports (`TransformersEngine.stats`)."""

    steps: int = 0  # decode forwards
    row_steps: int = 0  # rows summed over decode steps: each one is a token some reply kept
    attended: int = 0  # (rows x span) summed over decode steps: attention's KV columns
    attended_live: int = 0  # of which a row's own tokens (the rest: masked tails)
    prefills: int = 0  # prompts prefilled
    prefill_forwards: int = 0  # forwards that prefilled them (joiners go together)
    prompt_tokens: int = 0  # prompt tokens admitted
    prefix_hit_tokens: int = 0  # of which copied from the prefix cache, not computed
    prefill_padding: int = 0  # padding tokens computed in prefills (joiners of unequal length)
    max_rows: int = 0  # most rows live in one step
    preemptions: int = 0  # rows sent back to wait because the slab outgrew its budget
    recomputed_tokens: int = 0  # tokens prefilled again for preempted rows
    max_kv_bytes: int = 0  # the slab's largest size

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        hits = self.prefix_hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        out["prefix_hit_rate"] = round(hits, 4)
        out["attention_padding"] = round(1 - self.attended_live / self.attended, 4) if self.attended else 0.0
        return out


class DecodeLoop:
    """The loop's state and its steps; driven by one thread (the engine's worker), never shared.

    `admit` prefills a new sequence into a free row and samples its first token; `step` runs one
    decode forward over all live rows. A sequence leaves (its `done` called) the moment it has
    an end token or its room is used up."""

    def __init__(
        self,
        lm: Any,
        eos_ids: set[int],
        *,
        max_rows: int,
        limit: int | None,
        prefix_tokens: int,
        kv_budget_tokens: int | None = None,
        wide_threads: Callable[[], int] | None = None,
    ):
        import torch

        self.torch = torch
        self.lm = lm
        self.eos_ids = eos_ids
        self.max_rows = max_rows
        self.limit = limit
        self.kv_budget_tokens = kv_budget_tokens  # rows x time the slab may hold (None: unbounded)
        self.wide_threads = wide_threads  # threads of a wide forward (models.threads); None: as set
        self.device = next(lm.parameters()).device
        self.cache_kw = _cache_keyword(lm)
        self.slab = _SlabCache(max_rows, limit, torch.arange(max_rows, device=self.device))
        self.prefix = PrefixCache(prefix_tokens)
        self.live: list[Sequence] = []
        self.waiting: list[Sequence] = []  # admitted calls that wait for room (preempted ones first)
        self.stats = LoopStats()
        self._admitted = 0

    def has_room(self) -> bool:
        return len(self.live) + len(self.waiting) < self.max_rows

    def _forward(self, input_ids: Any, position_ids: Any, mask: Any) -> Any:
        torch = self.torch
        narrow = torch.get_num_threads()
        wide = narrow
        if self.wide_threads is not None and input_ids.numel() >= WIDE_FORWARD_TOKENS:
            wide = self.wide_threads()
        if wide != narrow:
            torch.set_num_threads(wide)
        try:
            out = self.lm(
                input_ids=input_ids,
                position_ids=position_ids,
                attention_mask=mask,
                use_cache=True,
                logits_to_keep=1,
                **{self.cache_kw: self.slab},
            )
        finally:
            if wide != narrow:
                torch.set_num_threads(narrow)
        return out.logits[:, -1, :].float()

    def _mask(self, allowed: Any) -> Any:
        """A 4D additive mask from a boolean one: 0 where attending, the dtype's minimum elsewhere."""
        dtype = self.slab.keys[0].dtype if self.slab.keys else next(self.lm.parameters()).dtype
        mask = self.torch.zeros(allowed.shape, dtype=dtype, device=self.device)
        return mask.masked_fill_(~allowed, self.torch.finfo(dtype).min)

    def admit(self, seq: Sequence) -> None:
        self.admit_many([seq])

    def _need(self, seq: Sequence, extra: int = 0) -> int:
        """Slab time `seq` needs now plus the growth it is promised (`extra`: up to RESERVE)."""
        n = len(seq.kv_tokens()) + 1
        grow = min(seq.room - len(seq.generated), RESERVE) if extra else 0
        need = n + max(grow, 0)
        return min(need, self.limit) if self.limit else need

    def _fits(self, rows: list[Sequence]) -> bool:
        """Whether `rows` (live and joining) fit the budget, each with its promised growth."""
        if self.kv_budget_tokens is None or len(rows) <= 1:
            return True
        return len(rows) * max(self._need(s, RESERVE) for s in rows) <= self.kv_budget_tokens

    def admit_many(self, seqs: list[Sequence]) -> None:
        """Queue `seqs`, then prefill the waiting calls that fit into the next free rows (each
        prompt's prefix from the cache where it can) and sample their first tokens.

        A call joins while the rows are fewer than `max_rows` and the KV budget keeps every
        row's promised growth (`_fits`); the others wait, in order. Prompts are prefilled
        together, left-padded to the longest uncached part: one forward reads the weights once
        for all of them (on a CPU a forward over a few rows costs about what one row does). A
        prompt that shares most of its uncached part with one already in this forward (a
        debate's agents, one prompt) waits for the next forward, which finds that part in the
        prefix cache."""
        for seq in seqs:
            seq.order = self._admitted
            self._admitted += 1
        self.waiting.extend(seqs)
        joining: list[Sequence] = []
        while self.waiting and len(self.live) + len(joining) < self.max_rows:
            seq = self.waiting[0]
            if seq.cancelled():
                self.waiting.pop(0)
                seq.done(seq.generated, "cancelled")
                continue
            if (self.live or joining) and not self._fits(self.live + joining + [seq]):
                break
            joining.append(self.waiting.pop(0))
        while joining:
            group, later, seen = [], [], set()
            for seq in joining:
                tokens = seq.kv_tokens()
                n = len(tokens)
                hashes = self.prefix.block_hashes(tokens[: n - 1])  # the last token always runs
                kv, start = self.prefix.lookup(tokens, hashes)
                shared = max((j + 1 for j, h in enumerate(hashes) if h in seen), default=0) * PREFIX_BLOCK
                if group and 2 * (shared - start) >= n - start:
                    later.append(seq)
                    continue
                group.append((seq, hashes, kv, start))
                seen.update(hashes)
            for part in _by_length(group):
                self._prefill(part)
            joining = later

    def _prefill(self, group: list[tuple[Sequence, list[int], Any, int]]) -> None:
        """One forward over `group`'s uncached parts, left-padded to the longest. A fresh row
        samples its first token from it; a preempted one only gets its KV back."""
        torch = self.torch
        first = len(self.live)
        k = len(group)
        tokens = [seq.kv_tokens() for seq, _, _, _ in group]
        counts = [len(t) - start for t, (_, _, _, start) in zip(tokens, group, strict=True)]
        width, span = max(counts), max(len(t) for t in tokens)
        self.slab.ensure(first + k, span + 1, self.kv_budget_tokens)
        ids = torch.zeros((k, width), dtype=torch.long)
        positions = torch.zeros((k, width), dtype=torch.long)  # padding: position 0, sees key 0
        for i, (seq, _, kv, start) in enumerate(group):
            n = len(tokens[i])
            seq.length = n
            sampled = seq.processors is not None and not getattr(seq.processors, "greedy", False)
            if seq.seed is not None and sampled and seq.generator is None:
                seq.generator = torch.Generator(device=self.device).manual_seed(seq.seed)
            if kv is not None:
                self.slab.copy_in(first + i, kv, start)
            ids[i, width - counts[i] :] = torch.tensor(tokens[i][start:])
            positions[i, width - counts[i] :] = torch.arange(start, n)
        ids, positions = ids.to(self.device), positions.to(self.device)
        starts = [start for _, _, _, start in group]
        self.slab.for_prefill(first, starts, counts, width, span)
        allowed = torch.arange(span, device=self.device)[None, None, :] <= positions[:, :, None]  # causal
        logits = self._forward(ids, positions, self._mask(allowed[:, None]))
        st = self.stats
        st.prefill_forwards += 1
        st.prefill_padding += k * width - sum(counts)
        st.max_kv_bytes = max(st.max_kv_bytes, self.slab.nbytes())
        fresh = []
        for i, (seq, hashes, _, start) in enumerate(group):
            if seq.generated:  # preempted: its reply goes on from the next step
                st.recomputed_tokens += counts[i]
            else:
                st.prefills += 1
                st.prompt_tokens += len(seq.prompt)
                st.prefix_hit_tokens += start
                self.prefix.add(seq.prompt, hashes, lambda m, row=first + i: self.slab.copy_out(row, m))
                fresh.append(i)
            self.live.append(seq)
        if fresh:
            self._take([group[i][0] for i in fresh], logits[fresh])

    def _preempt_to_fit(self) -> None:
        """While the live rows outgrow the budget, the last admitted waits first in line."""
        budget = self.kv_budget_tokens
        while budget is not None and len(self.live) > 1:
            if len(self.live) * (max(s.length for s in self.live) + 1) <= budget:
                return
            victim = max(self.live, key=lambda s: s.order)
            self._remove(victim)
            self.waiting.insert(0, victim)
            self.stats.preemptions += 1

    def step(self) -> None:
        """One decode forward: each live row's last token at its own position."""
        torch = self.torch
        self._preempt_to_fit()
        if not self.live:
            return
        rows = self.live
        lengths = torch.tensor([s.length for s in rows], device=self.device)
        span = int(lengths.max()) + 1
        self.slab.ensure(len(rows), span, self.kv_budget_tokens)
        self.slab.for_decode(lengths, span)
        ids = torch.tensor([[s.generated[-1]] for s in rows], device=self.device)
        allowed = torch.arange(span, device=self.device).unsqueeze(0) <= lengths.unsqueeze(1)
        logits = self._forward(ids, lengths.unsqueeze(1), self._mask(allowed[:, None, None, :]))
        st = self.stats
        st.steps += 1
        st.row_steps += len(rows)
        st.attended += len(rows) * span
        st.attended_live += int(lengths.sum()) + len(rows)
        st.max_rows = max(st.max_rows, len(rows))
        st.max_kv_bytes = max(st.max_kv_bytes, self.slab.nbytes())
        for s in rows:
            s.length += 1
        self._take(list(rows), logits)

    def _take(self, rows: list[Sequence], logits: Any) -> None:
        """Pick each row's next token, then let the rows that ended leave."""
        for seq, token in zip(rows, self._pick(rows, logits), strict=True):
            seq.generated.append(token)
        for seq in list(rows):
            last = seq.generated[-1]
            if last in self.eos_ids:
                self._leave(seq, seq.generated[:-1], "stop")
            elif len(seq.generated) >= seq.room:
                self._leave(seq, seq.generated, "length")
            elif seq.cancelled():
                self._leave(seq, seq.generated, "cancelled")

    def _pick(self, rows: list[Sequence], logits: Any) -> list[int]:
        torch = self.torch
        out: list[int | None] = [None] * len(rows)
        greedy = [i for i, s in enumerate(rows) if s.processors is None]
        if len(greedy) == len(rows):  # all greedy (the common case): no copy of the logits' rows
            return logits.argmax(dim=-1).tolist()
        if greedy:
            picked = logits[greedy].argmax(dim=-1).tolist()
            for i, t in zip(greedy, picked, strict=True):
                out[i] = t
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(rows):
            if s.processors is not None:
                groups.setdefault(s.key, []).append(i)
        for members in groups.values():  # rows with equal settings warp together
            seqs = [rows[i] for i in members]
            chain = seqs[0].processors
            if getattr(chain, "needs_ids", False):  # each row with its own tokens so far
                scores = torch.cat(
                    [
                        chain(torch.tensor([s.prompt + s.generated], device=self.device), logits[i : i + 1])
                        for i, s in zip(members, seqs, strict=True)
                    ]
                )
            else:
                scores = chain(None, logits[members])
            if getattr(chain, "greedy", False):
                for i, t in zip(members, scores.argmax(dim=-1).tolist(), strict=True):
                    out[i] = t
                continue
            probs = torch.softmax(scores, dim=-1)
            unseeded = [j for j, s in enumerate(seqs) if s.generator is None]
            if unseeded:
                drawn = torch.multinomial(probs[unseeded], 1).squeeze(1).tolist()
                for j, t in zip(unseeded, drawn, strict=True):
                    out[members[j]] = t
            for j, s in enumerate(seqs):
                if s.generator is not None:  # its own draws: independent of its batch mates
                    out[members[j]] = int(torch.multinomial(probs[j], 1, generator=s.generator))
        return [int(t) for t in out]

    def _leave(self, seq: Sequence, tokens: list[int], finish: str) -> None:
        self._remove(seq)
        seq.done(tokens, finish)

    def _remove(self, seq: Sequence) -> None:
        row = self.live.index(seq)
        last = len(self.live) - 1
        if row != last:  # the last live row takes the free one: live rows stay 0..n-1
            moved = self.live[last]
            self.slab.move_row(last, row, moved.length)
            self.live[row] = moved
        self.live.pop()

    def fail_all(self) -> list[Sequence]:
        """Drop every live and waiting row (after a failed forward); the caller fails their
        requests."""
        dropped, self.live, self.waiting = self.live + self.waiting, [], []
        return dropped


def warpers(kwargs: dict[str, Any]) -> Any:
    """transformers' logits processors for `generate`-style sampling keywords (`generate_kwargs`),
    in `generate`'s order; None when greedy with nothing else to apply. A keyword with no
    processor here raises NotImplementedError (the engine then runs that call through
    `generate`, so a sampling field declared later with an `hf` keyword is never silently
    dropped)."""
    from transformers import LogitsProcessorList
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    greedy = not kwargs.get("do_sample")
    if greedy and set(kwargs) == {"do_sample"}:
        return None
    makers = {  # generate's order: processors (which read the tokens so far), then warpers
        "repetition_penalty": lambda v: RepetitionPenaltyLogitsProcessor(penalty=v),
        "temperature": TemperatureLogitsWarper,
        "top_k": lambda v: TopKLogitsWarper(top_k=v),
        "top_p": lambda v: TopPLogitsWarper(top_p=v),
        "min_p": lambda v: MinPLogitsWarper(min_p=v),
    }
    unknown = set(kwargs) - set(makers) - {"do_sample"}
    if unknown:
        raise NotImplementedError(f"no per-row logits processor for {sorted(unknown)}")
    skip = {"temperature"} if math.isclose(kwargs.get("temperature", 1.0), 1.0) else set()
    chain = LogitsProcessorList(makers[k](kwargs[k]) for k in makers if k in kwargs and k not in skip)
    chain.needs_ids = any(k in kwargs for k in NEEDS_IDS)
    chain.greedy = greedy  # a field applied while greedy too (hf_sampling=False): argmax after it
    return chain


NEEDS_IDS = ("repetition_penalty",)  # processors that read each row's tokens so far
