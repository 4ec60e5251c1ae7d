"""Which templates a prompt pack must hold, and the placeholders each may use.

A template is a `str.format` text: `{name}` is filled in by the code, `{{` and `}}` are literal
braces. A pack is refused (one line, before any work) when a template is missing, is not text,
or names a placeholder its key does not offer; `REQUIRED` lists the placeholders a template
must use, where leaving one out would drop what the step is about (the question, an argument).
"""

from __future__ import annotations

GAME_FAMILIES = ("tic_tac_toe", "connect_four", "kuhn_poker", "leduc_poker", "hanabi")
_HANABI_RULES = frozenset(
    {
        "colors",
        "ranks",
        "color_names",
        "rank_counts",
        "per_color",
        "total_cards",
        "hand_size",
        "max_information_tokens",
        "max_life_tokens",
        "max_score",
    }
)
_SEAT = frozenset({"mark", "other_mark", "player", "other_player"})

# key -> the placeholders it may use
PLACEHOLDERS: dict[str, frozenset[str]] = {
    # MAD (Liang et al.; mars_eval.mas.mad)
    "mas.mad.debater_system": frozenset({"question"}),
    "mas.mad.affirmative_opening": frozenset({"question"}),
    "mas.mad.negative_opening": frozenset({"argument"}),
    "mas.mad.rebuttal": frozenset({"argument"}),
    "mas.mad.moderator_system": frozenset({"question"}),
    "mas.mad.moderator_round": frozenset({"ordinal", "affirmative", "negative"}),
    "mas.mad.judge_candidates": frozenset({"affirmative", "negative"}),
    "mas.mad.judge_pick": frozenset({"question"}),
    # Du et al.'s debate (mars_eval.mas.du_debate)
    "mas.debate.opening": frozenset({"prompt"}),
    "mas.debate.revise": frozenset({"others", "question"}),
    "mas.debate.other": frozenset({"text"}),
    "mas.debate.alone": frozenset({"answer_format"}),
    "mas.debate.aggregate": frozenset({"question", "solutions"}),
    "mas.debate.aggregate_solution": frozenset({"index", "text"}),
    # AutoGen (mars_eval.mas.autogen_chat)
    "mas.autogen.maslab_assistant_system": frozenset({"answer_format"}),
    "mas.autogen.assistant_system": frozenset({"answer_format"}),
    "mas.autogen.reviewer_system": frozenset({"answer_format"}),
    # DyLAN, MASLab's math variant (mars_eval.mas.dylan)
    "mas.dylan.system": frozenset(),
    "mas.dylan.opening": frozenset({"question"}),
    "mas.dylan.update": frozenset({"question", "solutions"}),
    "mas.dylan.solution": frozenset({"text"}),
    "mas.dylan.rank": frozenset({"question", "solutions"}),
    "mas.dylan.numbered": frozenset({"index", "text"}),
    # DyLAN, MASLab's main variant (mars_eval.mas.dylan_main)
    "mas.dylan.main_system": frozenset(),
    "mas.dylan.main_update": frozenset({"question", "responses", "count"}),
    "mas.dylan.main_response": frozenset({"index", "text"}),
    "mas.dylan.main_rank": frozenset({"question", "responses"}),
    # AgentVerse (mars_eval.mas.agentverse)
    "mas.agentverse.recruit_system": frozenset({"question", "n", "advice"}),
    "mas.agentverse.recruit": frozenset({"n"}),
    "mas.agentverse.solver_system": frozenset({"question"}),
    "mas.agentverse.solver": frozenset({"role"}),
    "mas.agentverse.critic_system": frozenset({"role", "question"}),
    "mas.agentverse.critic": frozenset(),
    "mas.agentverse.evaluator_system": frozenset({"roles", "question", "solution"}),
    "mas.agentverse.evaluator": frozenset(),
    "mas.agentverse.no_advice": frozenset(),
    "mas.agentverse.generic_expert": frozenset(),
    # MacNet (mars_eval.mas.macnet)
    "mas.macnet.review": frozenset({"question", "previous"}),
    "mas.macnet.improve": frozenset({"question", "previous", "suggestions"}),
    "mas.macnet.aggregate": frozenset(),
    "mas.macnet.candidate": frozenset({"node", "text"}),
    "mas.macnet.handed": frozenset({"node", "text"}),
    "mas.macnet.no_suggestions": frozenset(),
    # task prompts (mars_eval.tasks): "ours" adds the answer format, "bare" is the question alone
    "tasks.math.format": frozenset(),
    "tasks.math.prompt": frozenset({"question", "format"}),
    "tasks.math.bare": frozenset({"question"}),
    "tasks.gpqa.format": frozenset(),
    "tasks.gpqa.option": frozenset({"letter", "option"}),
    "tasks.gpqa.body": frozenset({"question", "options"}),
    "tasks.gpqa.prompt": frozenset({"body", "format"}),
    "tasks.gpqa.bare_option": frozenset({"letter", "option"}),
    "tasks.gpqa.bare": frozenset({"question", "options"}),
    # --task custom (mars_eval.tasks.custom): exact and choice answers (math uses tasks.math)
    "tasks.custom.exact_format": frozenset(),
    "tasks.custom.exact": frozenset({"question", "format"}),
    "tasks.custom.exact_bare": frozenset({"question"}),
    "tasks.custom.choice_format": frozenset({"letters"}),
    "tasks.custom.choice_option": frozenset({"letter", "option"}),
    "tasks.custom.choice_body": frozenset({"question", "options"}),
    "tasks.custom.choice": frozenset({"body", "format"}),
    # the games' "full" style (mars_eval.games.core): answer format, the turn's closing lines
    "games.full.answer_format": frozenset(),
    "games.full.act": frozenset({"legal"}),
    "games.compact.legal": frozenset({"legal"}),
    "games.full.first": frozenset(),
    "games.full.second": frozenset(),
    "games.full.hanabi.middle": frozenset(),
    # the games' reference-style chat (mars_eval.games.reference_env)
    "games.turn.own": frozenset({"n"}),
    "games.turn.other_full": frozenset({"n"}),
    "games.turn.other_action": frozenset({"n"}),
    "games.turn.state": frozenset({"state", "legal"}),
    "games.turn.chosen": frozenset({"action"}),
    "games.hanabi.rank_counts.2": frozenset({"per_color"}),
    "games.hanabi.rank_counts.3": frozenset({"per_color"}),
    "games.hanabi.rank_counts.4": frozenset({"per_color"}),
    "games.hanabi.rank_counts.5": frozenset({"per_color"}),
}
for _family in GAME_FAMILIES:
    _rules = _HANABI_RULES if _family == "hanabi" else frozenset()
    PLACEHOLDERS.update(
        {
            f"games.{_family}.system": frozenset(),
            f"games.{_family}.rules": _rules | _SEAT,
            f"games.{_family}.information": _SEAT,
            f"games.{_family}.format": frozenset(),
            f"games.{_family}.example": frozenset({"mark"}),
            f"games.{_family}.instructions": frozenset({"format", "example"}),
            f"games.{_family}.user": frozenset({"rules", "information", "instructions"}),
        }
    )

# the games' "full" style: rules and seat of each game; "compact": the one short user message
_BOARD_COMPACT = frozenset({"mark", "board"})
_ROLE = frozenset({"player", "order"})
PLACEHOLDERS.update(
    {
        "games.full.tic_tac_toe.rules": frozenset(),
        "games.full.connect_four.rules": frozenset(),
        "games.full.kuhn_poker.rules": frozenset(),
        "games.full.leduc_poker.rules": frozenset(),
        "games.full.hanabi.rules": frozenset(
            {
                "colors",
                "color_list",
                "ranks",
                "middle",
                "hand_size",
                "max_score",
                "max_information_tokens",
                "max_life_tokens",
            }
        ),
        "games.full.tic_tac_toe.role": _ROLE | {"mark"},
        "games.full.connect_four.role": _ROLE | {"mark"},
        "games.full.kuhn_poker.role": _ROLE,
        "games.full.leduc_poker.role": _ROLE,
        "games.full.hanabi.role": _ROLE,
        "games.compact.tic_tac_toe": _BOARD_COMPACT,
        "games.compact.connect_four": _BOARD_COMPACT,
        "games.compact.kuhn_poker": frozenset({"player", "card", "moves", "options"}),
        "games.compact.leduc_poker": frozenset({"player", "card", "public", "pot", "moves", "options"}),
        "games.compact.hanabi": frozenset(
            {"fireworks", "lives", "hints", "deck", "own", "partner", "last_move", "options"}
        ),
        # the "compact-legal" style: the compact message, then this line with the legal moves
        "games.compact.legal": frozenset({"legal"}),
        # the LLM judge (mars_eval.tasks.judge): the problem as sent, the system's final reply, the gold
        "scoring.judge": frozenset({"question", "response", "gold"}),
    }
)

# key -> placeholders it must use (the rest of PLACEHOLDERS is optional)
REQUIRED: dict[str, frozenset[str]] = {
    "mas.dylan.opening": frozenset({"question"}),
    "mas.dylan.update": frozenset({"question", "solutions"}),
    "mas.dylan.solution": frozenset({"text"}),
    "mas.dylan.rank": frozenset({"question", "solutions"}),
    "mas.dylan.numbered": frozenset({"index", "text"}),
    "mas.dylan.main_update": frozenset({"question", "responses"}),
    "mas.dylan.main_response": frozenset({"text"}),
    "mas.dylan.main_rank": frozenset({"question", "responses"}),
    "mas.agentverse.recruit_system": frozenset({"question", "n"}),
    "mas.agentverse.solver_system": frozenset({"question"}),
    "mas.agentverse.critic_system": frozenset({"question"}),
    "mas.agentverse.evaluator_system": frozenset({"question", "solution"}),
    "mas.macnet.improve": frozenset({"question", "previous"}),
    "mas.macnet.candidate": frozenset({"text"}),
    "mas.macnet.handed": frozenset({"text"}),
    "mas.mad.negative_opening": frozenset({"argument"}),
    "mas.mad.rebuttal": frozenset({"argument"}),
    "mas.mad.moderator_round": frozenset({"affirmative", "negative"}),
    "mas.mad.judge_candidates": frozenset({"affirmative", "negative"}),
    "mas.debate.opening": frozenset({"prompt"}),
    "mas.debate.revise": frozenset({"others"}),
    "mas.debate.other": frozenset({"text"}),
    "mas.debate.aggregate": frozenset({"solutions"}),
    "mas.debate.aggregate_solution": frozenset({"text"}),
    "tasks.math.prompt": frozenset({"question"}),
    "tasks.math.bare": frozenset({"question"}),
    "tasks.gpqa.option": frozenset({"letter", "option"}),
    "tasks.gpqa.body": frozenset({"question", "options"}),
    "tasks.gpqa.prompt": frozenset({"body"}),
    "tasks.gpqa.bare_option": frozenset({"letter", "option"}),
    "tasks.gpqa.bare": frozenset({"question", "options"}),
    "tasks.custom.exact": frozenset({"question"}),
    "tasks.custom.exact_bare": frozenset({"question"}),
    "tasks.custom.choice_option": frozenset({"letter", "option"}),
    "tasks.custom.choice_body": frozenset({"question", "options"}),
    "tasks.custom.choice": frozenset({"body"}),
    "games.full.act": frozenset({"legal"}),
    "games.compact.tic_tac_toe": _BOARD_COMPACT,
    "games.compact.connect_four": _BOARD_COMPACT,
    "games.compact.kuhn_poker": frozenset({"card", "options"}),
    "games.compact.leduc_poker": frozenset({"card", "public", "options"}),
    "games.compact.hanabi": frozenset({"fireworks", "own", "partner", "options"}),
    "games.turn.state": frozenset({"state", "legal"}),
    "games.turn.chosen": frozenset({"action"}),
    "scoring.judge": frozenset({"response", "gold"}),
    **{f"games.{f}.user": frozenset({"rules", "information", "instructions"}) for f in GAME_FAMILIES},
}

# Templates added after run identity 2: a pack written before may lack them (ours' text is then
# used), and while a pack's text for one is ours' it is left out of the pack's hash, so adding
# one renames no run folder (the system using it versions ours' text by its `protocol`).
LATER: frozenset[str] = frozenset(
    {
        "mas.dylan.main_system",
        "mas.dylan.main_update",
        "mas.dylan.main_response",
        "mas.dylan.main_rank",
        "scoring.judge",
        "games.compact.legal",
    }
)

# The games' prompt styles (mars_eval/games/core.py renders them); "compact" and "compact-legal"
# send one user message a turn, with no history. Here, not in the games package, so settings can
# validate a style without importing OpenSpiel.
GAME_PROMPT_STYLES = ("reference", "full", "compact", "compact-legal")
SINGLE_TURN_STYLES = ("compact", "compact-legal")

# Lists of text (not templates): key -> how many entries at least.
LISTS: dict[str, int] = {"mas.macnet.personas": 2, "games.hanabi.colors": 5}
