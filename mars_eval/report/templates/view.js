// mars-eval view: draws the pages from the JSON endpoints. Every text from a run folder is put
// in with textContent (el() below), never parsed as HTML.
"use strict";

const app = document.getElementById("app");
const live = document.getElementById("live");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    else if (k === "href") node.setAttribute("href", safeHref(v));
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function safeHref(v) {
  const s = String(v);
  return (s.startsWith("/") && !s.startsWith("//")) || s.startsWith("#") ? s : "/";
}

function url(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

function tokens(r) { return r.prompt_tokens === null || r.prompt_tokens === undefined ? null : r.prompt_tokens + r.completion_tokens; }
function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1); }
function num(x) { return x === null || x === undefined ? "–" : Number(x).toLocaleString("en"); }
function interval(lo, hi) { return lo === null || lo === undefined ? "" : ` [${pct(lo)}, ${pct(hi)}]`; }
function verdictOf(r) {
  if (r.error) return ["errored", "error"];
  if (r.correct === true) return [r.outcome || "right", "right"];
  if (r.correct === false) return [r.outcome || (r.no_answer ? "wrong (no answer)" : "wrong"), "wrong"];
  return ["?", ""];
}

async function getJSON(path, params) {
  const resp = await fetch(url(path, params), { headers: { Accept: "application/json" } });
  if (!resp.ok) {
    let why = `${resp.status}`;
    try { why = (await resp.json()).error || why; } catch (e) { why = (await resp.text().catch(() => why)) || why; }
    throw new Error(why);
  }
  return resp.json();
}

// --- pages ---------------------------------------------------------------------------------
const params = () => new URLSearchParams(location.search);

async function listPage() {
  const data = await getJSON("/api/runs");
  const picked = new Set(params().getAll("pick"));
  const body = [el("h1", {}, "Run folders"), el("p", { class: "meta" }, `under ${data.roots.join(", ")}: ${data.runs.length} run folder(s)${data.reading ? ` (reading ${data.reading}: their summary.json until then)` : ""}`)];
  const compareLink = el("a", { id: "compare-link", href: "/" }, "compare the two ticked runs");
  const ticks = [];
  const updateLink = () => {
    const ids = ticks.filter((t) => t.checked).map((t) => t.value);
    compareLink.setAttribute("href", ids.length === 2 ? url("/compare", { a: ids[0], b: ids[1] }) : "/");
    compareLink.className = ids.length === 2 ? "" : "meta";
  };
  const head = el("tr", {}, ["", "run", "kind", "task", "system", "model", "done / planned", "errors", "cut", "no answer", "accuracy [95%]", "tokens", "calls", "skipped lines"].map((h, i) => el("th", { class: i < 6 ? "l" : "" }, h)));
  let group = null;
  const rows = [];
  for (const r of data.runs) {
    if (r.group !== group) {
      group = r.group;
      rows.push(el("tr", { class: "group" }, el("th", { class: "l", colspan: 14 }, group || "(top)")));
    }
    const tick = el("input", { type: "checkbox", value: r.id, checked: picked.has(r.id), on: { change: updateLink } });
    ticks.push(tick);
    const acc = r.kind === "train" ? `${num(r.steps)} steps` : `${pct(r.accuracy)}${interval(r.ci_low, r.ci_high)}${r.metric !== "accuracy" ? " " + r.metric : ""}`;
    rows.push(el("tr", { "data-run": r.id },
      el("td", {}, tick),
      el("td", { class: "l" }, el("a", { href: url("/run", { run: r.id }) }, r.name), r.running ? el("span", { class: "running tag" }, "running") : null, r.reading ? el("span", { class: "tag" }, "reading…") : null, r.problem ? el("span", { class: "bad" }, " " + r.problem) : null),
      el("td", { class: "l" }, r.kind), el("td", { class: "l" }, r.task ?? ""), el("td", { class: "l" }, r.system ?? ""), el("td", { class: "l" }, r.model ?? "", el("div", { class: "meta settings" }, r.settings)),
      el("td", { class: "done" }, r.kind === "train" ? "" : `${num(r.done)} / ${r.planned === null ? "?" : num(r.planned)}`),
      el("td", {}, num(r.errors)), el("td", {}, num(r.cut_replies)), el("td", {}, num(r.no_answer)),
      el("td", { class: "acc" }, acc), el("td", {}, num(tokens(r))), el("td", {}, num(r.calls)),
      el("td", { class: r.skipped_lines ? "bad" : "" }, num(r.skipped_lines))));
  }
  body.push(el("p", {}, compareLink));
  body.push(el("div", { class: "wide" }, el("table", { id: "runs" }, el("thead", {}, head), el("tbody", {}, rows))));
  if (data.bad.length) {
    body.push(el("h2", {}, "Folders that cannot be read"));
    body.push(el("ul", { id: "bad" }, data.bad.map((b) => el("li", {}, `${b.id}: ${b.why}`))));
  }
  updateLink();
  return body;
}

function statsLine(r) {
  if (r.kind === "train") return el("p", { id: "stats" }, `${num(r.steps)} steps logged (metrics.jsonl) · ${num(r.eval_points.length)} with evaluation figures`);
  const bits = [`${num(r.done)} / ${r.planned === null ? "?" : num(r.planned)} done`, `${num(r.errors)} errored`, `${num(r.cut_replies)} cut replies (${num(r.truncated)} samples)`, `${num(r.no_answer)} without answer`, `${num(r.calls)} calls`, `${num(r.prompt_tokens)} + ${num(r.completion_tokens)} tokens`];
  if (r.kind !== "train") bits.unshift(`${r.metric} ${pct(r.accuracy)}%${interval(r.ci_low, r.ci_high)}`);
  if (r.mean_return !== undefined) bits.push(`mean return ${r.mean_return.toFixed(3)} [${r.mean_return_low.toFixed(3)}, ${r.mean_return_high.toFixed(3)}]`);
  return el("p", { id: "stats" }, r.running ? el("span", { class: "running" }, "running · ") : null, bits.join(" · "));
}

async function runPage() {
  const p = params();
  const id = p.get("run");
  const filter = p.get("filter") || "all";
  const problem = p.get("problem") || "";
  const q = p.get("q") || "";
  const page = p.get("page") || "1";
  const [run, samples] = await Promise.all([
    getJSON("/api/run", { run: id }),
    getJSON("/api/samples", { run: id, filter, problem, q, page }),
  ]);
  const out = [el("h1", {}, run.name), el("p", { class: "meta" }, run.path), statsLine(run)];
  if (run.problem) out.push(el("p", { class: "bad" }, run.problem));
  out.push(el("details", {}, el("summary", {}, "configuration"), el("pre", { id: "config" }, JSON.stringify(run.config, null, 2))));
  if (run.skipped.length) {
    out.push(el("details", { id: "skipped", open: true }, el("summary", { class: "bad" }, `${run.skipped_lines} samples.jsonl line(s) skipped`), el("ul", {}, run.skipped.map((s) => el("li", {}, s)))));
  }
  if (run.kind === "train") {
    out.push(el("h2", {}, "Last metrics"), el("pre", {}, JSON.stringify(run.last, null, 2)));
    if (run.eval_points.length) out.push(el("h2", {}, "Evaluation points"), el("pre", {}, JSON.stringify(run.eval_points, null, 2)));
    return out;
  }
  const go = (changes) => navigate(url("/run", { run: id, filter, problem, q, page: 1, ...changes }));
  const select = el("select", { name: "filter", on: { change: (e) => go({ filter: e.target.value }) } },
    ["all", "correct", "wrong", "no_answer", "errored", "truncated"].map((f) => el("option", { value: f, selected: f === filter }, f.replace("_", " "))));
  const problemBox = el("input", { name: "problem", placeholder: run.kind === "games" ? "game" : "problem id", value: problem });
  const search = el("input", { name: "q", placeholder: "text search", value: q, type: "search" });
  out.push(el("form", { class: "filters", on: { submit: (e) => { e.preventDefault(); go({ problem: problemBox.value, q: search.value }); } } },
    select, problemBox, search, el("button", { type: "submit" }, "filter")));
  const games = run.kind === "games";
  const head = el("tr", {}, (games ? ["line", "game", "opponent", "seat", "episode", "outcome", "return", "calls", "tokens", "cut"] : ["line", "problem", "sample", "verdict", "answer", "gold", "agents", "calls", "tokens", "cut"]).map((h) => el("th", { class: "l" }, h)));
  const rows = samples.rows.map((r) => {
    const [word, cls] = verdictOf(r);
    const link = el("a", { href: url("/sample", { run: id, key: r.key }) }, games ? r.game : r.problem_id);
    const cells = games
      ? [r.line, link, r.opponent, r.seat, r.index, word, r.agent_return, r.calls, r.prompt_tokens + r.completion_tokens, r.cut]
      : [r.line, link, r.sample, r.error ? `errored: ${r.error}` : word, r.answer ?? "(none)", r.gold ?? "", r.agents, r.calls, r.prompt_tokens + r.completion_tokens, r.cut];
    return el("tr", { class: `sample ${cls}`, "data-key": r.key }, cells.map((c) => el("td", { class: "l" }, c)));
  });
  out.push(el("p", { class: "meta", id: "count" }, `${num(samples.total)} sample(s) match · page ${samples.page} of ${samples.pages}`));
  out.push(el("div", { class: "wide" }, el("table", { id: "samples" }, el("thead", {}, head), el("tbody", {}, rows))));
  out.push(pager(samples, (n) => navigate(url("/run", { run: id, filter, problem, q, page: n }))));
  return out;
}

function pager(paging, to) {
  return el("p", { class: "pager" },
    el("button", { disabled: paging.page <= 1, on: { click: () => to(paging.page - 1) } }, "previous"),
    el("button", { disabled: paging.page >= paging.pages, on: { click: () => to(paging.page + 1) } }, "next"));
}

function textBlock(text, cls) { return el("pre", { class: cls || "" }, text ?? ""); }

async function samplePage() {
  const p = params();
  const s = await getJSON("/api/sample", { run: p.get("run"), key: p.get("key") });
  const r = s.row;
  const [word, cls] = verdictOf(r);
  const out = [el("p", {}, el("a", { href: url("/run", { run: s.run }) }, `← ${s.run}`)),
    el("h1", {}, s.kind === "games" ? `${r.game} · ${r.opponent} · ${r.seat} · episode ${r.index}` : `${r.problem_id} · sample ${r.sample}`),
    el("p", {}, el("span", { class: `verdict ${cls}`, id: "verdict" }, word),
      s.kind === "games" ? null : [" answer ", el("code", { id: "answer" }, s.fields.answer ?? "(none)"), " · gold ", el("code", { id: "gold" }, s.fields.gold ?? ""), s.fields.how ? ` · ${s.fields.how}` : ""]),
    el("p", { class: "meta" }, `samples.jsonl line ${s.line} · ${num(r.calls)} calls · ${num(r.prompt_tokens)} + ${num(r.completion_tokens)} tokens · ${num(r.cut)} cut replies`)];
  if (s.fields.error) out.push(el("div", { class: "event", id: "failure" }, el("strong", {}, "error: "), textBlock(s.fields.error), s.traceback ? el("details", {}, el("summary", {}, "traceback"), textBlock(s.traceback)) : null));
  if (s.messages.length) out.push(el("h2", {}, "Question"), el("div", { id: "question" }, s.messages.map((m) => el("div", { class: "turn" }, el("span", { class: "who" }, m.role), textBlock(m.content)))));
  const calls = s.entries.filter((e) => !e.event);
  const agents = [...new Set(calls.map((e) => e.agent))];
  const rounds = [...new Set(calls.map((e) => e.round))].sort((a, b) => a - b);
  if (calls.length) {
    out.push(el("h2", {}, "By agent and round"));
    const head = el("tr", {}, el("th", {}, "round"), agents.map((a) => el("th", { class: "l" }, a)));
    const body = rounds.map((rd) => el("tr", {}, el("th", {}, rd), agents.map((a) => el("td", {}, calls.filter((e) => e.agent === a && e.round === rd).map((e) => el("a", { href: `#e${e.index}`, class: e.cut ? "tag cut" : "tag" }, `#${e.index}${e.cut ? " cut" : ""}`))))));
    out.push(el("table", { class: "matrix", id: "matrix" }, el("thead", {}, head), el("tbody", {}, body)));
  }
  if (s.kind === "games") {
    const shown = ["outcome", "returns", "agent_return", "invalid", "invalid_reason", "turns", "seed", "history"];
    out.push(el("h2", {}, "Episode"), textBlock(shown.filter((k) => k in s.fields).map((k) => `${k}: ${JSON.stringify(s.fields[k])}`).join("\n")));
  }
  out.push(el("h2", {}, `Transcript (${calls.length} calls)`));
  const entries = s.entries.map((e) => {
    if (e.event) return el("div", { class: "event", id: `e${e.index}` }, el("strong", {}, `${e.event}`), e.agent ? ` · ${e.agent}` : "", textBlock(Object.entries(e.fields).filter(([k]) => k !== "event" && k !== "agent").map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join("\n")));
    const tags = [el("span", { class: "tag" }, `round ${e.round}`), e.role ? el("span", { class: "tag" }, e.role) : null,
      el("span", { class: "tag" }, `${num(e.prompt_tokens)} + ${num(e.completion_tokens)} tokens`),
      el("span", { class: e.cut ? "tag cut" : "tag" }, `finish: ${e.finish_reason ?? "not recorded"}${e.cut ? " (cut at max_tokens)" : ""}`),
      e.cached ? el("span", { class: "tag" }, "cached") : null];
    return el("div", { class: e.cut ? "turn cut" : "turn", id: `e${e.index}`, "data-agent": e.agent },
      el("div", {}, el("span", { class: "who" }, `#${e.index} ${e.agent}`), tags),
      e.new_messages.length ? el("details", { class: "prompt" }, el("summary", {}, `sent: ${e.new_messages.length} new message(s) (after ${e.prompt_from ?? 0} kept)`), e.new_messages.map((m) => el("div", {}, el("em", {}, m.role), textBlock(m.content)))) : null,
      e.thinking ? el("details", { class: "thinking" }, el("summary", {}, `thinking (${e.thinking.length} characters)`), textBlock(e.thinking)) : null,
      textBlock(e.content, "reply"));
  });
  out.push(el("div", { id: "transcript" }, entries));
  if (s.final_text !== null && s.final_text !== undefined) out.push(el("h2", {}, "Final text"), textBlock(s.final_text));
  if (s.details && Object.keys(s.details).length) out.push(el("details", {}, el("summary", {}, "details"), textBlock(JSON.stringify(s.details, null, 2))));
  out.push(el("details", {}, el("summary", {}, "all fields"), textBlock(JSON.stringify(s.fields, null, 2))));
  return out;
}

async function comparePage() {
  const p = params();
  const a = p.get("a"), b = p.get("b"), only = p.get("only") || "disagree", page = p.get("page") || "1";
  const c = await getJSON("/api/compare", { a, b, only, page });
  const out = [el("h1", {}, "Side by side"),
    el("p", {}, "A: ", el("a", { href: url("/run", { run: a }) }, c.a.id), ` (${c.a.system ?? ""}, ${c.a.model ?? ""}) ${pct(c.a.accuracy)}%`),
    el("p", {}, "B: ", el("a", { href: url("/run", { run: b }) }, c.b.id), ` (${c.b.system ?? ""}, ${c.b.model ?? ""}) ${pct(c.b.accuracy)}%`)];
  if (c.note) out.push(el("p", { class: "note", id: "note" }, c.note));
  if (c.stats) {
    const st = c.stats;
    out.push(el("p", { id: "paired" }, `paired on ${num(st.n_paired)} problems (${num(st.n_pairs)} samples): A ${pct(st.accuracy_a)}%, B ${pct(st.accuracy_b)}%, B − A ${pct(st.delta)} points [${pct(st.ci_low)}, ${pct(st.ci_high)}], p = ${st.p_value === null ? "–" : st.p_value.toPrecision(3)} (${st.test_name}); right only in A ${st.right_only_in_a}, only in B ${st.right_only_in_b}`));
  }
  if (c.games) {
    const gh = el("tr", {}, ["game", "opponent", "seat", "episodes", "A wins", "B wins", "B − A (points)", "p", "A return", "B return", "B − A return", "p"].map((h) => el("th", { class: "l" }, h)));
    const fixed = (x) => (x === null || x === undefined ? "–" : x.toFixed(3));
    const pv = (x) => (x === null || x === undefined ? "–" : x.toPrecision(3));
    const gr = c.games.map((g) => el("tr", { class: "game-row" }, [g.game, g.opponent, g.seat, num(g.n_paired), `${pct(g.win_rate_a)}%`, `${pct(g.win_rate_b)}%`,
      `${pct(g.delta_win_rate)}${interval(g.win_ci_low, g.win_ci_high)}`, pv(g.win_p_value), fixed(g.mean_return_a), fixed(g.mean_return_b),
      `${fixed(g.delta_return)} [${fixed(g.ci_low)}, ${fixed(g.ci_high)}]`, pv(g.p_value)].map((v) => el("td", { class: "l" }, v))));
    out.push(el("table", { id: "games-paired" }, el("thead", {}, gh), el("tbody", {}, gr)));
  }
  out.push(el("p", { class: "meta" }, `only in A: ${c.only_in_a} · only in B: ${c.only_in_b}`));
  out.push(el("form", { class: "filters" }, el("select", { name: "only", on: { change: (e) => navigate(url("/compare", { a, b, only: e.target.value })) } },
    [["disagree", "where they disagree"], ["errored", "errored in either"], ["all", "every pair"]].map(([v, t]) => el("option", { value: v, selected: v === only }, t)))));
  if (c.kind === "games") return out.concat(gamePairs(c, a, b, only));
  const head = el("tr", {}, ["problem", "sample", "A", "A's answer", "B", "B's answer", "gold"].map((h) => el("th", { class: "l" }, h)));
  const rows = c.pairs.map((pr) => {
    const [wa, ca] = verdictOf(pr.a), [wb, cb] = verdictOf(pr.b);
    return el("tr", { class: "pair" }, el("td", { class: "l" }, pr.problem_id), el("td", {}, pr.sample),
      el("td", { class: `l ${ca}` }, el("a", { href: url("/sample", { run: a, key: pr.a.key }) }, wa)), el("td", { class: "l" }, pr.a.answer ?? "(none)"),
      el("td", { class: `l ${cb}` }, el("a", { href: url("/sample", { run: b, key: pr.b.key }) }, wb)), el("td", { class: "l" }, pr.b.answer ?? "(none)"),
      el("td", { class: "l" }, pr.a.gold ?? ""));
  });
  out.push(el("p", { class: "meta", id: "count" }, `${num(c.total)} pair(s) · page ${c.page} of ${c.pages}`));
  out.push(el("table", { id: "pairs" }, el("thead", {}, head), el("tbody", {}, rows)));
  out.push(pager(c, (n) => navigate(url("/compare", { a, b, only, page: n }))));
  return out;
}

function gamePairs(c, a, b, only) {
  const head = el("tr", {}, ["game", "opponent", "seat", "episode seed", "A", "A's return", "B", "B's return"].map((h) => el("th", { class: "l" }, h)));
  const rows = c.pairs.map((pr) => {
    const [wa, ca] = verdictOf(pr.a), [wb, cb] = verdictOf(pr.b);
    return el("tr", { class: "pair" }, [pr.game, pr.opponent, pr.seat, pr.seed].map((v) => el("td", { class: "l" }, v)),
      el("td", { class: `l ${ca}` }, el("a", { href: url("/sample", { run: a, key: pr.a.key }) }, pr.a.error ? wa : pr.a.outcome ?? wa)), el("td", { class: "l" }, pr.a.agent_return),
      el("td", { class: `l ${cb}` }, el("a", { href: url("/sample", { run: b, key: pr.b.key }) }, pr.b.error ? wb : pr.b.outcome ?? wb)), el("td", { class: "l" }, pr.b.agent_return));
  });
  return [el("p", { class: "meta", id: "count" }, `${num(c.total)} episode pair(s) · page ${c.page} of ${c.pages}`),
    el("table", { id: "pairs" }, el("thead", {}, head), el("tbody", {}, rows)),
    pager(c, (n) => navigate(url("/compare", { a, b, only, page: n })))];
}

// --- drawing and live updates ------------------------------------------------------------------
const PAGES = { "/": listPage, "/run": runPage, "/sample": samplePage, "/compare": comparePage };
let drawing = null;
let again = false;
window.viewDraws = 0; // pages drawn (tests wait on it)

async function draw() {
  if (drawing) { again = true; return drawing; }
  drawing = (async () => {
    const page = PAGES[location.pathname] || listPage;
    const y = window.scrollY;
    const opened = [...app.querySelectorAll("details")].map((d) => d.open);
    try {
      const nodes = await page();
      app.replaceChildren(...nodes);
      const now = [...app.querySelectorAll("details")];
      if (now.length === opened.length) now.forEach((d, i) => { d.open = opened[i]; });
      window.scrollTo(0, y);
    } catch (e) {
      app.replaceChildren(el("p", { class: "bad", id: "failed" }, `cannot show this page: ${e.message}`));
    }
    window.viewDraws += 1;
    window.viewDrawnAt = performance.now(); // ms since navigation (the benchmark reads it)
  })();
  await drawing;
  drawing = null;
  if (again) { again = false; await draw(); }
}

function navigate(to) {
  history.pushState(null, "", to);
  window.scrollTo(0, 0);
  draw();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const href = a.getAttribute("href") || "";
  if (href.startsWith("#") || !href.startsWith("/")) return;
  e.preventDefault();
  navigate(href);
});
window.addEventListener("popstate", draw);

let held = false; // a change came while someone types in a box of the page: drawn on leaving it

function typing() {
  const a = document.activeElement;
  return a && app.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT");
}

document.addEventListener("focusout", () => { if (held) { held = false; setTimeout(draw, 0); } });

function listen() {
  const events = new EventSource("/api/events");
  let first = true;
  events.addEventListener("change", () => {
    live.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
    if (first) { first = false; return; }
    if (typing()) { held = true; return; }
    draw();
  });
  events.onerror = () => { live.textContent = "not connected (retrying)"; };
}

draw();
listen();
