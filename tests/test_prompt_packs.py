"""Prompt packs: the built-in `ours`, a round trip through `prompts show` and `--prompts FILE`,
refusal of bad packs, and the importers on small fake checkouts whose text is written here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from mars_eval.games import reference_env
from mars_eval.models.base import ConfigError
from mars_eval.prompts import PLACEHOLDERS, PromptPack, load_pack, pack_from_data
from mars_eval.prompts.importers import import_mars, import_maslab
from mars_eval.tasks import make_task
from tests.support.cli import cli_env, mas_args, run_cli
from tests.support.scripted_policy import Reply, ScriptedRequest

MODEL = "scripted-model"


def test_ours_holds_every_template_and_loads_back_from_its_yaml():
    ours = load_pack()
    assert ours.name == "ours" and set(PLACEHOLDERS) <= set(ours.templates)
    again = pack_from_data(yaml.safe_load(ours.to_yaml()), "copy")
    assert again.templates == ours.templates and again.hash == ours.hash


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t["mas"]["mad"].pop("rebuttal"), "template mas.mad.rebuttal is missing"),
        (lambda t: t["mas"]["mad"].update(rebuttal="{argument} {nope}"), "unknown placeholder {nope}"),
        (lambda t: t["mas"]["mad"].update(rebuttal="no argument here"), "must use placeholder {argument}"),
        (lambda t: t["tasks"]["math"].update(prompt="{question.__class__}"), "is not a plain name"),
        (lambda t: t["tasks"]["math"].update(prompt="{question"), "tasks.math.prompt"),
        (lambda t: t["games"]["hanabi"].update(colors="Red"), "games.hanabi.colors must be a list"),
        (lambda t: t["mas"].update(extra={"x": "y"}), "unknown template mas.extra.x"),
        (
            lambda t: t["games"]["full"]["kuhn_poker"].pop("rules"),
            "template games.full.kuhn_poker.rules is missing",
        ),
        (
            lambda t: t["games"]["compact"].update(kuhn_poker="{card} {options} {mark}"),
            "unknown placeholder {mark}",
        ),
        (lambda t: t["tasks"]["custom"].update(exact="{format}"), "must use placeholder {question}"),
    ],
)
def test_a_bad_pack_is_refused_with_one_line(change, message):
    data = yaml.safe_load(load_pack().to_yaml())
    change(data["templates"])
    with pytest.raises(
        ConfigError, match=message.replace("{", r"\{").replace("}", r"\}").replace(".", r"\.")
    ):
        pack_from_data(data, "bad.yaml")


def test_round_trip_show_edit_and_run_with_the_file(tmp_path, scripted_server):
    shown = run_cli(["prompts", "show", "ours"])
    assert shown.returncode == 0, shown.describe()
    data = yaml.safe_load(shown.stdout)
    data["name"] = "edited"
    data["templates"]["tasks"]["math"]["prompt"] = "PACK-EDIT {question}\n{format}"
    pack_file = tmp_path / "edited.yaml"
    pack_file.write_text(yaml.safe_dump(data))

    sent: list[str] = []

    def policy(req: ScriptedRequest) -> Reply:
        sent.append(req.messages[-1]["content"])
        return Reply("So \\boxed{0}.")

    srv = scripted_server(policy, model=MODEL)
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task="arith")
    plain = run_cli(args + ["--limit", "2"])
    assert plain.returncode == 0, plain.describe()
    assert not any("PACK-EDIT" in s for s in sent)
    edited = run_cli(args + ["--limit", "2", "--prompts", str(pack_file)])
    assert edited.returncode == 0, edited.describe()
    assert len(sent) == 4 and all(s.startswith("PACK-EDIT ") for s in sent[2:])
    assert edited.summary["run_dir"] != plain.summary["run_dir"]  # the pack is part of the identity
    pack = load_pack(str(pack_file))
    assert edited.summary["prompts"] == {"name": "edited", "hash": pack.hash}
    config = json.loads((Path(edited.summary["run_dir"]) / "config.json").read_text())
    assert config["prompts"] == {"name": "edited", "hash": pack.hash}
    assert plain.summary["prompts"] == {"name": "ours", "hash": load_pack().hash}

    data["templates"]["mas"]["mad"]["judge_pick"] = "{topic}"
    pack_file.write_text(yaml.safe_dump(data))
    bad = run_cli(args + ["--limit", "2", "--prompts", str(pack_file), "--output", str(tmp_path / "none")])
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "unknown placeholder {topic}" in bad.stderr and not (tmp_path / "none").exists()
    games = run_cli(["games", "--agent", "random", "--episodes", "1", "--prompts", "no-such-pack"])
    assert games.returncode == 2 and "no prompt pack 'no-such-pack'" in games.stderr


def _legal_move(req: ScriptedRequest) -> Reply:
    """The first legal action listed ("Legal actions: ..." in full, "Options: ..." in compact)."""
    found = re.findall(r"^(?:Legal actions|Options): ([^.\n]*)", req.messages[-1]["content"], re.MULTILINE)
    return Reply(f"<answer>{found[-1].split(', ')[0]}</answer>" if found else "no idea")


@pytest.mark.parametrize("style", ["full", "compact"])
def test_games_full_and_compact_prose_comes_from_the_pack(tmp_path, scripted_server, style):
    shown = run_cli(["prompts", "show", "ours"])
    assert shown.returncode == 0, shown.describe()
    data = yaml.safe_load(shown.stdout)
    games = data["templates"]["games"]
    games["full"]["kuhn_poker"]["rules"] = "RULES-EDIT " + games["full"]["kuhn_poker"]["rules"]
    games["compact"]["kuhn_poker"] = "COMPACT-EDIT " + games["compact"]["kuhn_poker"]
    pack_file = tmp_path / "games.yaml"
    pack_file.write_text(yaml.safe_dump(data))

    srv = scripted_server(_legal_move, model=MODEL)
    args = ["games", "--model", MODEL, "--base-url", srv.base_url, "--games", "kuhn_poker", "--episodes", "1"]
    args += ["--prompt-style", style, "--opponents", "random", "--output", str(tmp_path / "runs"), "--json"]
    plain = run_cli(args)
    assert plain.returncode == 0, plain.describe()
    ours_prompts = [e.prompt for e in srv.app.entries()]
    assert ours_prompts and not any("EDIT" in p for p in ours_prompts)
    assert all(
        p.startswith("You are playing Kuhn poker" if style == "full" else "Kuhn poker (J<Q<K)")
        for p in ours_prompts
    )
    srv.app.reset()
    edited = run_cli([*args, "--prompts", str(pack_file)])
    assert edited.returncode == 0, edited.describe()
    sent = [e.prompt for e in srv.app.entries()]
    edit = "RULES-EDIT You are playing Kuhn poker" if style == "full" else "COMPACT-EDIT Kuhn poker (J<Q<K)"
    assert sent and all(p.startswith(edit) for p in sent)
    assert all(r["invalid_rate"] == 0.0 for r in edited.summary["results"])  # the state still renders
    assert edited.summary["run_dir"] != plain.summary["run_dir"]  # the pack is part of the identity


# --- importers on fake checkouts (text written for these tests) -------------------------------
_ENV = """
class Env:
    def _get_prefix_prompt(self, think=True, player_id=0):
        system_prompt = "SYS {title}"
        rules = (
            "R1 {title} rules.\\n"
            "R2 braces {row} stay."
        )
        mark = "O" if player_id == 1 else "X"
        opponent_mark = "O" if mark == "X" else "X"
        information = (
            f"I1 mark {mark} vs {opponent_mark}, seat {player_id} and {1-player_id}.\\n"
        )
        FORMAT_PROMPT = "<answer>{pick}</answer>"
        FORMAT_PROMPT_EXAMPLE = f"<answer><{mark}(1)></answer>"
        instructions = (
            f"N1 `{FORMAT_PROMPT}` e.g. `{FORMAT_PROMPT_EXAMPLE}`."
        )
        user_prompt = (
            f"A:\\n{rules}\\n\\nB:\\n{information}\\n\\nC:\\n{instructions}\\n\\n"
        )
        return {"system": system_prompt, "user": user_prompt}
"""
_HANABI = """
class Env:
    def _get_prefix_prompt(self, think=True, player_id=0):
        system_prompt = "SYS hanabi"
        color_set = ["Rr", "Yy", "Gg", "Ww", "Bb"]
        c, r = self.colors, self.ranks
        per_color = 3 + 2 * (r - 2) + 1
        total_cards = c * per_color
        color_names = ", ".join(color_set[:c])
        if r == 5:
            rank_range_str = f"five ranks, {per_color} each,"
        elif r == 4:
            rank_range_str = f"four ranks, {per_color} each,"
        elif r == 3:
            rank_range_str = f"three ranks, {per_color} each,"
        elif r == 2:
            rank_range_str = f"two ranks, {per_color} each,"
        rules = (
            f"H {c} colors {color_names} to {r}; {rank_range_str} {total_cards} cards; "
            f"hand {self.hand_size}; {self.max_information_tokens}/{self.max_life_tokens}; top {r*c}."
        )
        information = f"You are {player_id}."
        FORMAT_PROMPT = "<answer>{x}</answer>"
        FORMAT_PROMPT_EXAMPLE = "<answer><Discard card 0></answer>"
        instructions = f"Use `{FORMAT_PROMPT}`, e.g. `{FORMAT_PROMPT_EXAMPLE}`."
        user_prompt = f"{rules}|{information}|{instructions}|"
        return {"system": system_prompt, "user": user_prompt}
"""
_MANAGER = """
class Manager:
    def _format_messages(self, prepare_for_update, use_raw_llm_response, player_id=0):
        messages = [{"role": "system", "content": ""}]
        for idx, content in enumerate(self.rollout_cache["history"]):
            turn_idx = idx + 1
            is_opponent_turn = content["player"] != player_id
            if is_opponent_turn:
                if self.env_entry["env"].include_opponent_turn == "full":
                    turn_idx_content = f"T{turn_idx} theirs, seen.\\n"
                elif self.env_entry["env"].include_opponent_turn == "action":
                    turn_idx_content = f"T{turn_idx} theirs, hidden.\\n"
            else:
                turn_idx_content = f"T{turn_idx} mine.\\n"
            messages[-1]["content"] += turn_idx_content
            if is_opponent_turn:
                messages[-1]["content"] += (
                    f"S={content['state']} L={', '.join(content['legal_actions'].values())}\\n"
                )
                messages[-1]["content"] += f"picked {content['actions']}\\n"
            else:
                messages[-1]["content"] += (
                    f"S={content['state']} L={', '.join(content['legal_actions'].values())}\\n"
                )
        return messages
"""


def _fake_mars(root: Path) -> Path:
    games = {"tictactoe": "Tic", "connect_four": "Four", "kuhn_poker": "Kuhn", "leduc_poker": "Leduc"}
    for folder, title in games.items():
        path = root / "roll/agentic/env" / folder / "env.py"
        path.parent.mkdir(parents=True)
        path.write_text(textwrap.dedent(_ENV.replace("{title}", title)))
    (root / "roll/agentic/env/hanabi").mkdir(parents=True)
    (root / "roll/agentic/env/hanabi/env.py").write_text(textwrap.dedent(_HANABI))
    (root / "roll/agentic/rollout").mkdir(parents=True)
    (root / "roll/agentic/rollout/env_manager.py").write_text(textwrap.dedent(_MANAGER))
    return root


def _git_commit(root: Path) -> str | None:
    if shutil.which("git") is None:
        return None
    env = {**cli_env(), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "fake"]):
        subprocess.run(["git", "-C", str(root), *cmd], check=True, env=env, capture_output=True)
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def test_mars_import_reads_the_environments_text(tmp_path):
    root = _fake_mars(tmp_path / "MARS")
    commit = _git_commit(root)
    pack = import_mars(root)
    assert pack.name == "mars" and pack.source["repository"] == "thu-nics/MARS"
    assert pack.source["commit"] == commit
    assert "games.turn.own" in pack.source["imported"] and "mas.mad.rebuttal" not in pack.source["imported"]
    assert pack.templates["mas.mad.rebuttal"] == load_pack().templates["mas.mad.rebuttal"]  # from ours

    head = reference_env.prefix("tic_tac_toe", 1, pack=pack)
    assert head["system"] == "SYS Tic"
    assert head["user"] == (
        "A:\nR1 Tic rules.\nR2 braces {row} stay.\n\nB:\nI1 mark O vs X, seat 1 and 0.\n\n\n"
        "C:\nN1 `<answer>{pick}</answer>` e.g. `<answer><O(1)></answer>`.\n\n"
    )
    hanabi = reference_env.prefix("simple_hanabi", 0, pack=pack)["user"]
    assert hanabi.startswith(
        "H 3 colors Rr, Yy, Gg to 2; two ranks, 4 each, 12 cards; hand 5; 8/3; top 6.|You are 0.|"
    )
    from mars_eval.games import make_game

    ep = make_game("kuhn_poker").new_episode(0)
    ep.apply("Check")
    chat = ep.messages(1, "reference", [], pack)
    state = reference_env.render_state("kuhn_poker", ep.state)
    expected = f"T1 theirs, hidden.\npicked <PASS>\nT2 mine.\nS={state} L=<PASS>, <BET>\n"
    assert chat[1]["content"].endswith(expected)


def test_mars_import_through_the_cli_stores_the_pack(tmp_path):
    root = _fake_mars(tmp_path / "MARS")
    env = cli_env(XDG_DATA_HOME=str(tmp_path / "data"))
    done = run_cli(["prompts", "import", "mars", str(root)], env=env)
    assert done.returncode == 0, done.describe()
    stored = tmp_path / "data/mars-eval/prompts/mars.yaml"
    assert stored.is_file() and str(stored) in done.stdout
    listed = run_cli(["prompts", "list"], env=env)
    assert "ours" in listed.stdout and "mars" in listed.stdout and "thu-nics/MARS" in listed.stdout
    shown = run_cli(["prompts", "show", "mars"], env=env)
    assert yaml.safe_load(shown.stdout)["templates"]["games"]["kuhn_poker"]["system"] == "SYS Kuhn"

    env_file = root / "roll/agentic/env/tictactoe/env.py"
    env_file.write_text(env_file.read_text().replace("{mark} vs", "{mark.lower()} vs"))
    broken = run_cli(["prompts", "import", "mars", str(root)], env=env)
    assert broken.returncode == 2 and len(broken.stderr.strip().splitlines()) == 1
    assert "unexpected f-string field {mark.lower()}" in broken.stderr
    missing = run_cli(["prompts", "import", "mars", str(tmp_path)], env=env)
    assert missing.returncode == 2 and "is it a checkout of the right repository?" in missing.stderr


_MAD_PROMPTS = """
PLAYER_META_PROMPT = "Debater here. Topic: ##debate_topic##"
MODERATOR_META_PROMPT = "Moderator here. Topic: ##debate_topic##"
AFFIRMATIVE_PROMPT = "##debate_topic##"
NEGATIVE_PROMPT = "##aff_ans##\\n\\nDisagree, please."
MODERATOR_PROMPT = "Round ##round## done. A: ##aff_ans## N: ##neg_ans## Reply {\\"debate_answer\\": \\"\\"}."
JUDGE_PROMPT_LAST1 = "A: ##aff_ans## N: ##neg_ans## List candidates."
JUDGE_PROMPT_LAST2 = "Again: ##debate_topic## Reply {\\"debate_answer\\": \\"\\"}."
DEBATE_PROMPT = "##oppo_ans##\\n\\nAgree?"
"""
_AUTOGEN = '''
ASSISTANT_AGENT_SYSTEM_MESSAGE = """Assistant, no code. Say TERMINATE when done."""
'''
_DEBATE = '''
class Debate:
    def inference(self, sample):
        query = sample["query"]
        contexts = [[{"role": "user", "content": f"""{query} End with the answer."""}] for _ in range(3)]
        return contexts

    def construct_message(self, agents, question, idx):
        if len(agents) == 0:
            return {"role": "user", "content": "Alone: check it."}
        prefix_string = "Others said:"
        for agent in agents:
            agent_response = agent[idx]["content"]
            response = "\\n- ```{}```".format(agent_response)
            prefix_string = prefix_string + response
        prefix_string = prefix_string + "\\nUpdate. Problem: {}.".format(question)
        return {"role": "user", "content": prefix_string}

    def aggregate(self, query, answers):
        aggregate_instruction = f"Q:\\n{query}\\n"
        for i, answer in enumerate(answers):
            aggregate_instruction += f"#{i+1}: {answer}\\n"
        aggregate_instruction += "Decide."
        return aggregate_instruction
'''
_DATASETS = """
def format_gpqa_query(example):
    query = example["Question"]
    query += "\\n\\nPick one:"
    query += f"\\n(A) {example['Correct Answer']}"
    query += f"\\n(B) {example['Incorrect Answer 1']}"
    query += f"\\n(C) {example['Incorrect Answer 2']}"
    query += f"\\n(D) {example['Incorrect Answer 3']}"
    return query

rows = [{"query": example["Problem"], "gt": example["Answer"]} for example in []]
"""


def _fake_maslab(root: Path) -> Path:
    files = {
        "methods/mad/mad_prompt.py": _MAD_PROMPTS,
        "methods/autogen/prompt.py": _AUTOGEN,
        "methods/llm_debate/llm_debate_main.py": _DEBATE,
        "datasets/build_test_dataset.py": _DATASETS,
        **MORE_SYSTEMS,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def test_maslab_import_reads_mad_autogen_debate_and_queries(tmp_path):
    pack = import_maslab(_fake_maslab(tmp_path / "MASLab"))
    t = pack.templates
    assert pack.name == "maslab" and pack.source["repository"] == "MASWorks/MASLab"
    assert t["mas.mad.debater_system"] == "Debater here. Topic: {question}"
    assert t["mas.mad.negative_opening"] == "{argument}\n\nDisagree, please."
    assert PromptPack.render(
        pack, "mas.mad.moderator_round", ordinal="first", affirmative="a", negative="n"
    ) == ('Round first done. A: a N: n Reply {"debate_answer": ""}.')
    assert t["mas.autogen.maslab_assistant_system"] == "Assistant, no code. Say TERMINATE when done."
    assert t["mas.debate.opening"] == "{prompt} End with the answer."
    assert t["mas.debate.revise"] == "Others said:{others}\nUpdate. Problem: {question}."
    assert t["mas.debate.other"] == "\n- ```{text}```" and t["mas.debate.alone"] == "Alone: check it."
    assert t["mas.debate.aggregate"] == "Q:\n{question}\n{solutions}Decide."
    assert t["mas.debate.aggregate_solution"] == "#{index}: {text}\n"
    assert (
        t["tasks.gpqa.bare"] == "{question}\n\nPick one:\n{options}"
        and t["tasks.gpqa.bare_option"] == "({letter}) {option}"
    )
    task = make_task("gpqa", prompts=pack, task_prompt="bare")
    assert task.answer_format == ""


def test_a_run_with_the_imported_maslab_pack_sends_its_text(tmp_path, scripted_server):
    env = cli_env(XDG_DATA_HOME=str(tmp_path / "data"))
    done = run_cli(["prompts", "import", "maslab", str(_fake_maslab(tmp_path / "MASLab"))], env=env)
    assert done.returncode == 0, done.describe()
    systems: list[str] = []

    def policy(req: ScriptedRequest) -> Reply:
        systems.append(str(req.messages[0]["content"]))
        if req.messages[-1]["content"].startswith("Round "):
            return Reply('{"debate_answer": "\\\\boxed{0}"}')
        return Reply("So \\boxed{0}.")

    srv = scripted_server(policy, model=MODEL)
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task="arith", system="mad"
    )
    res = run_cli(args + ["--limit", "1", "--prompts", "maslab", "--task-prompt", "bare"], env=env)
    assert res.returncode == 0, res.describe()
    question = make_task("arith").load()[0].question
    assert systems[0] == f"Debater here. Topic: {question}" and len(systems) == 3
    assert res.summary["prompts"]["name"] == "maslab"


# Minimal MASLab files for the issue-21 systems (same shapes as the real ones, made-up text).
_AGENTVERSE_PROMPTS = '''
ROLE_ASSIGNER_PREPEND_PROMPT = """Lead. Problem: ${query}. Recruit ${cnt_agents}. Advice: ${advice}"""
ROLE_ASSIGNER_APPEND_PROMPT = """Name ${cnt_agents} experts as 1. ... 2. ..."""
SOLVER_PREPEND_PROMPT = """Solve: ${query}"""
SOLVER_APPEND_PROMPT = """You are ${role_description}. Solve it."""
CRITIC_PREPEND_PROMPT = """You are ${role_description}. Problem: ${query}"""
CRITIC_APPEND_PROMPT = """Critique; end with [Agree] if you agree."""
EVALUATOR_PREPEND_PROMPT = """Experts: ${all_role_description}\\nProblem: ${query}\\nSolution: ${solution}"""
EVALUATOR_APPEND_PROMPT = """Correctness: 0 or 1\\nResponse: advice"""
'''
_AGENTVERSE_MAIN = """
class AgentVerse_Main:
    def __init__(self, general_config):
        self.advice = "Nothing yet."
"""
_DYLAN_MATH = """
class DyLAN_MATH:
    def __init__(self, general_config):
        self.system_prompt = "Debate."
        if self.mode == "complex":
            self.system_prompt += " Follow the examples."

    def _prepare_question(self, query):
        if self.mode == "complex":
            return self.examples + f"\\n\\nProblem: {query}\\nAnswer:"
        return self.examples + f"\\n\\nProblem: {query}\\nAnswer:"

    def _construct_message(self, agents, question):
        prefix_string = "Follow.\\n\\n" + question + "\\n\\nOthers:"
        for agent in agents:
            agent_response = agent[-1]["content"]
            response = f"\\n\\nOne: ```{agent_response}```"
            prefix_string += response
        prefix_string += "\\n\\nUpdate."
        return prefix_string

    def _construct_ranking_message(self, agents, question):
        prefix_string = "Follow.\\n\\n" + question + "\\n\\nRank:"
        for aid, agent in enumerate(agents, 1):
            agent_response = agent[-1]["content"]
            response = f"\\n\\nAgent {aid}: ```{agent_response}```"
            prefix_string += response
        prefix_string += "\\n\\nPick [1,2]."
        return prefix_string
"""
_DYLAN_UTILS = '''
def get_examples(mode) -> str:
    if mode == "simple":
        return """Easy examples."""
    else:
        return r"""Hard example: \\boxed{1}."""
'''
_MACNET_PROMPTS = '''
INSTRUCTOR_PROMPT = """Review "{previous_answer}" for "{query}"; or <INFO>No revision needed"""
ASSISTANT_PROMPT = """Improve "{previous_answer}" for "{query}" with "{suggestions}"."""
CC_PROMPT = """Merge these:\\n"""
SYSTEM_PROMPT = ["A baker.", "A pilot.", "A poet."]
'''
_MACNET_MAIN = """
class Node:
    def interact(self, query, previous_answer):
        self.suggestions = "Nothing."

    def aggregate_answers(self, answer_dict):
        aggregation_prompt = CC_PROMPT
        for node_id, answer in answer_dict.items():
            aggregation_prompt += f"<{node_id}> {answer}\\n"
        return aggregation_prompt


class MacNet_Main:
    def graph_inference(self, query, topo):
        pre_answer = ""
        for node_id, answer in predecessor_answers.items():
            pre_answer += f"({node_id}) {answer}\\n"
"""
_DYLAN_MAIN = """
class DyLAN_Main:
    def _get_role_map(self):
        return {"Helper": "You help.", "Judge": "You judge."}

    def _construct_message(self, responses, question):
        if len(responses) == 0:
            return {"role": "user", "content": question}
        prefix_string = question + "\\n\\nReplies: "
        for aid, aresponse in enumerate(responses, 1):
            response = "\\n\\nReply " + str(aid) + ": ```{}```".format(aresponse)
            prefix_string = prefix_string + response
        prefix_string = prefix_string + "\\n\\nUpdate; rate all {} as [[1, 2]].".format(len(responses))
        return {"role": "user", "content": prefix_string}

    def _construct_ranking_message(self, responses, question):
        prefix_string = question + "\\n\\nReplies: "
        for aid, aresponse in enumerate(responses, 1):
            response = "\\n\\nReply " + str(aid) + ": ```{}```".format(aresponse)
            prefix_string = prefix_string + response
        prefix_string = prefix_string + "\\n\\nBest two as [1,2]."
        return {"role": "user", "content": prefix_string}
"""
MORE_SYSTEMS = {
    "methods/dylan/dylan_main.py": _DYLAN_MAIN,
    "methods/dylan/configs/config_main.yaml": "roles:\n  - Helper\n  - Helper\n",
    "methods/agentverse/prompt_main.py": _AGENTVERSE_PROMPTS,
    "methods/agentverse/agentverse_main.py": _AGENTVERSE_MAIN,
    "methods/dylan/dylan_math.py": _DYLAN_MATH,
    "methods/dylan/utils_math.py": _DYLAN_UTILS,
    "methods/macnet/prompt_main.py": _MACNET_PROMPTS,
    "methods/macnet/macnet_main.py": _MACNET_MAIN,
}


def test_maslab_import_reads_dylan_agentverse_and_macnet(tmp_path):
    t = import_maslab(_fake_maslab(tmp_path / "MASLab")).templates
    assert t["mas.agentverse.recruit_system"] == "Lead. Problem: {question}. Recruit {n}. Advice: {advice}"
    evaluator = "Experts: {roles}\nProblem: {question}\nSolution: {solution}"
    assert t["mas.agentverse.evaluator_system"] == evaluator
    assert t["mas.agentverse.no_advice"] == "Nothing yet."
    assert t["mas.dylan.system"] == "Debate. Follow the examples."
    assert t["mas.dylan.opening"] == "Hard example: \\boxed{{1}}.\n\nProblem: {question}\nAnswer:"
    opening = t["mas.dylan.opening"]
    assert t["mas.dylan.update"] == "Follow.\n\n" + opening + "\n\nOthers:{solutions}\n\nUpdate."
    assert t["mas.dylan.rank"].endswith("Rank:{solutions}\n\nPick [1,2].")
    assert t["mas.dylan.solution"] == "\n\nOne: ```{text}```"
    assert t["mas.dylan.numbered"] == "\n\nAgent {index}: ```{text}```"
    assert t["mas.dylan.main_system"] == "You help.\n"  # config_main.yaml's role, a newline added
    assert (
        t["mas.dylan.main_update"]
        == "{question}\n\nReplies: {responses}\n\nUpdate; rate all {count} as [[1, 2]]."
    )
    assert t["mas.dylan.main_rank"] == "{question}\n\nReplies: {responses}\n\nBest two as [1,2]."
    assert t["mas.dylan.main_response"] == "\n\nReply {index}: ```{text}```"
    assert t["mas.macnet.review"] == 'Review "{previous}" for "{question}"; or <INFO>No revision needed'
    assert t["mas.macnet.improve"] == 'Improve "{previous}" for "{question}" with "{suggestions}".'
    assert t["mas.macnet.personas"] == ["A baker.", "A pilot.", "A poet."]
    assert t["mas.macnet.no_suggestions"] == "Nothing."
    assert t["mas.macnet.candidate"] == "<{node}> {text}\n" and t["mas.macnet.handed"] == "({node}) {text}\n"
    # Ours has every key too; the pack's text is what the systems send.
    from mars_eval.mas import make_system

    pack = PromptPack("maslab", t)
    net = make_system("macnet", prompts=pack)
    assert set(net.persona.values()) <= {"A pilot.", "A poet."}  # randint(1, len - 1), as MASLab


def test_runs_of_dylan_agentverse_macnet_with_the_maslab_pack_send_its_text(tmp_path, scripted_server):
    env = cli_env(XDG_DATA_HOME=str(tmp_path / "data"))
    done = run_cli(["prompts", "import", "maslab", str(_fake_maslab(tmp_path / "MASLab"))], env=env)
    assert done.returncode == 0, done.describe()
    firsts: list[list[dict]] = []
    srv = scripted_server(lambda req: (firsts.append(req.messages), Reply("So \\boxed{0}."))[1], model=MODEL)
    question = make_task("arith").load()[0].question
    for system, extra in (
        ("dylan", ["--dylan-variant", "math"]),
        ("dylan", []),  # arith runs the main variant, as MASLab's dispatch for a task not named MATH
        ("agentverse", []),
        ("macnet", []),
    ):
        firsts.clear()
        args = mas_args(
            model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task="arith", system=system
        )
        res = run_cli(
            args + ["--limit", "1", "--prompts", "maslab", "--task-prompt", "bare", *extra], env=env
        )
        assert res.returncode == 0, res.describe()
        system_text, user_text = firsts[0][0]["content"], firsts[0][-1]["content"]
        if system == "dylan" and not extra:
            assert system_text == "You help.\n" and user_text == question
        elif system == "dylan":
            assert system_text == "Debate. Follow the examples."
            assert user_text.startswith("Hard example: \\boxed{1}.\n\nProblem: ") and question in user_text
        elif system == "agentverse":
            assert (
                system_text.startswith(f"Lead. Problem: {question}") and "Advice: Nothing yet." in system_text
            )
            assert user_text == "Name 2 experts as 1. ... 2. ..."
        else:
            assert system_text in ("A pilot.", "A poet.") and user_text.startswith('Improve "" for "')
