/**
 * The playground page served at GET /: one self-contained HTML document (inline CSS and vanilla
 * JS, no external requests) that lists databases, asks over /v1/stream (in a conversation when
 * follow-ups are on, showing its thread), draws the decoding tree, and stores an answer as a
 * verified example ("this is right") or its question with the right SQL ("this is wrong").
 * Kept as a string module so it is found the same way from src/ (tsx) and dist/ (tsc).
 */
import { PROFILES, REWRITE_RULES } from "../../agent/index.js";
import { STRATEGIES } from "../../config/index.js";
import { exampleQuestions } from "../../examples/index.js";

const escapeHtml = (s: string): string => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);

/** The page opens on the pruned tree: it shows the most of what the playground is for. */
const STRATEGY_OPTIONS = STRATEGIES.map(
  (s) => `<option value="${s}"${s === "tree-prune" ? " selected" : ""}>${s === "tree-prune" ? "tree + prune" : s}</option>`,
).join("");
/** Each example database's first question, with its hint, as the "Try the example" button fills them in. */
const EXAMPLES: Record<string, { question: string; evidence: string }> = {};
for (const q of exampleQuestions()) EXAMPLES[q.db_id] ??= { question: q.question, evidence: q.evidence };
/** What a `repair` event's fields say, one entry a rewrite rule (the agent's `REWRITE_RULES`), in order. */
const REWRITES = REWRITE_RULES.map((r) => ({ field: r.eventField, says: r.says }));
const PROFILE_OPTIONS = PROFILES.map((p) => `<option value="${p.id}" title="${escapeHtml(p.title)}">${p.id}</option>`).join("");

const CSS = /* css */ `
:root {
  --bg: #f6f7fb; --panel: #ffffff; --ink: #1d2433; --muted: #6b7385; --line: #e3e6ee;
  --accent: #3b5bdb; --accent-soft: #edf2ff; --ok: #2b8a3e; --ok-soft: #ebfbee; --bad: #c92a2a;
  --bad-soft: #fff5f5; --warn: #e67700; --code-bg: #f1f3f9;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { display: flex; align-items: center; gap: 12px; padding: 14px 24px; background: var(--panel); border-bottom: 1px solid var(--line); }
header h1 { font-size: 18px; margin: 0; letter-spacing: .2px; }
header h1 span { color: var(--accent); }
header .tagline { color: var(--muted); font-size: 13px; }
header .status { margin-left: auto; display: flex; align-items: center; gap: 6px; color: var(--muted); font-size: 12px; }
.dot { width: 9px; height: 9px; border-radius: 50%; background: #adb5bd; display: inline-block; }
.dot.ok { background: var(--ok); } .dot.bad { background: var(--bad); }
main { display: grid; grid-template-columns: 340px 1fr; gap: 20px; padding: 20px 24px; align-items: start; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 16px; box-shadow: 0 1px 2px rgba(16,24,40,.04); }
.card h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .6px; color: var(--muted); margin: 0 0 12px; }
label { display: block; font-size: 12px; font-weight: 600; color: var(--muted); margin: 12px 0 4px; }
input, select, textarea, button { font: inherit; }
input[type=text], input[type=password], input[type=number], select, textarea {
  width: 100%; padding: 7px 9px; border: 1px solid var(--line); border-radius: 7px; background: #fff; color: var(--ink); }
textarea { resize: vertical; min-height: 70px; }
input:focus, select:focus, textarea:focus { outline: 2px solid var(--accent-soft); border-color: var(--accent); }
.row { display: flex; gap: 8px; align-items: center; }
.row > * { flex: 1; }
.row > .shrink { flex: 0 0 auto; }
button { border: 1px solid var(--line); background: #fff; border-radius: 7px; padding: 7px 12px; cursor: pointer; color: var(--ink); }
button:hover { border-color: var(--accent); }
input[type=file] { width: 100%; font-size: 12.5px; color: var(--muted); }
input[type=file]::file-selector-button { font: inherit; border: 1px solid var(--line); background: #fff; border-radius: 7px; padding: 5px 10px; margin-right: 10px; cursor: pointer; color: var(--ink); }
input[type=file]::file-selector-button:hover { border-color: var(--accent); }
button.link { border: 0; background: none; padding: 0 0 0 6px; color: var(--accent); font-weight: 400; text-decoration: underline; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; font-weight: 600; }
button.primary:disabled { opacity: .55; cursor: default; }
.actions { display: flex; gap: 8px; margin-top: 16px; }
.actions .primary { flex: 1; }
.hint { color: var(--muted); font-size: 12px; margin-top: 6px; }
.banner { border-radius: 8px; padding: 10px 12px; margin-bottom: 14px; font-size: 13px; display: none; }
.banner.show { display: block; }
.banner.error { background: var(--bad-soft); color: var(--bad); border: 1px solid #ffc9c9; }
.banner.warn { background: #fff9db; color: #8f5800; border: 1px solid #ffe8a1; }
.banner.info { background: var(--accent-soft); color: var(--accent); border: 1px solid #d0dbff; }
.answer-sql { font-family: var(--mono); font-size: 13px; background: var(--code-bg); border-radius: 8px; padding: 12px; white-space: pre-wrap; word-break: break-word; margin: 0 0 12px; }
.meta { display: flex; flex-wrap: wrap; gap: 6px; margin-bottom: 12px; }
.pill { display: inline-block; border-radius: 999px; padding: 2px 9px; font-size: 12px; background: var(--code-bg); color: var(--muted); white-space: nowrap; }
.badges { display: flex; flex-wrap: wrap; gap: 6px; }
.pill.ok { background: var(--ok-soft); color: var(--ok); } .pill.bad { background: var(--bad-soft); color: var(--bad); }
.pill.accent { background: var(--accent-soft); color: var(--accent); }
.empty { color: var(--muted); font-style: italic; }
.teach { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 0 0 12px; }
.teach textarea { font-family: var(--mono); font-size: 13px; }
.teach-note { font-size: 12px; } .teach-note.ok { color: var(--ok); } .teach-note.bad { color: var(--bad); }
.thread { font-size: 12px; color: var(--muted); margin: 0 0 12px; } .thread li { margin: 2px 0; } .thread code { font-family: var(--mono); }
table.result { border-collapse: collapse; width: 100%; font-size: 12.5px; }
table.result th, table.result td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; font-family: var(--mono); white-space: nowrap; max-width: 260px; overflow: hidden; text-overflow: ellipsis; }
table.result th { background: #fafbfe; color: var(--muted); font-weight: 600; position: sticky; top: 0; }
.table-wrap { max-height: 260px; overflow: auto; border: 1px solid var(--line); border-radius: 7px; }
.right { display: flex; flex-direction: column; gap: 20px; min-width: 0; }
.tree { display: flex; flex-direction: column; gap: 10px; }
.node { border: 1px solid var(--line); border-left: 3px solid var(--accent); border-radius: 8px; background: #fff; padding: 10px 12px; min-width: 0; }
.node.pruned { border-left-color: #adb5bd; background: #f8f9fa; color: #868e96; }
.node.pruned .text, .node.pruned .probe { opacity: .6; }
.node.winner { border-left-color: var(--ok); box-shadow: 0 0 0 2px var(--ok-soft); }
.node.failed { border-left-color: var(--bad); }
.node-head { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; margin-bottom: 6px; }
.node-head .path { font-family: var(--mono); font-size: 12px; font-weight: 700; }
.children { margin: 10px 0 0 14px; padding-left: 12px; border-left: 2px dashed var(--line); display: flex; flex-direction: column; gap: 10px; }
.children:empty { display: none; }
.text { font-family: var(--mono); font-size: 12px; white-space: pre-wrap; word-break: break-word; max-height: 180px; overflow: auto; background: var(--code-bg); border-radius: 6px; padding: 8px; margin: 0; }
.text:empty { display: none; }
.probe { margin-top: 8px; border: 1px solid var(--line); border-radius: 7px; overflow: hidden; }
.probe-head { font-size: 12px; background: #fafbfe; padding: 5px 8px; color: var(--muted); display: flex; gap: 8px; }
.probe pre { margin: 0; padding: 6px 8px; font-family: var(--mono); font-size: 12px; white-space: pre-wrap; word-break: break-word; }
.probe .err { color: var(--bad); padding: 6px 8px; font-size: 12px; }
.probe .table-wrap { border: 0; border-top: 1px solid var(--line); border-radius: 0; max-height: 150px; }
.candidate { margin-top: 8px; font-size: 12px; }
.candidate code { font-family: var(--mono); background: var(--code-bg); padding: 1px 4px; border-radius: 4px; }
.counter { color: var(--muted); font-size: 12px; margin-left: auto; }
@media (max-width: 900px) { main { grid-template-columns: 1fr; } }
`;

const SCRIPT = /* js */ `
"use strict";
const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
const state = { ws: null, nodes: new Map(), candidates: new Map(), events: 0, answer: null, conversation: null, thread: [] };

function apiKey() { return $("key").value.trim(); }
function headers(extra) { const h = Object.assign({}, extra || {}); const k = apiKey(); if (k) h.Authorization = "Bearer " + k; return h; }
function banner(kind, text) { const b = $("banner"); b.className = "banner show " + kind; b.textContent = text; }
function clearBanner() { $("banner").className = "banner"; }

const MODEL_NOTES = {
  starter: "This server answers with reex's 13.8M starter model, a small demonstration policy trained on the project's own data: it probes and answers in the right format, but answers few questions on a database of your own. Run npx reex models pull qwen2.5-coder-0.5b to install the default model (Qwen2.5-Coder-0.5B-Instruct).",
  placeholder: "This server runs a random-weight placeholder model (no starter model was found): its SQL is noise. Set policy.model to a text-to-SQL GGUF.",
};
function showModelNote(origin, reason) {
  const n = $("model-note"); const text = MODEL_NOTES[origin] && (reason && origin === "starter" ? reason + ". " : "") + MODEL_NOTES[origin];
  n.className = text ? "banner show warn" : "banner"; n.textContent = text || "";
}

async function checkReady() {
  try {
    const r = await fetch("/readyz");
    const body = await r.json();
    $("ready-dot").className = "dot " + (r.ok ? "ok" : "bad");
    $("ready-text").textContent = r.ok ? (body.policy ? (body.modelName || body.policy.model) + " · " + body.policy.device + (body.profile ? " · profile " + body.profile.id : "") : "ready") : body.code;
    $("ready-text").title = r.ok && body.profile ? "profile " + body.profile.id + ": " + body.profile.reason : "";
    if (r.ok && body.profile) $("profile-default").textContent = "server default (" + body.profile.id + ")";
    if (r.ok) showModelNote(body.modelOrigin, body.modelReason);
  } catch (e) { $("ready-dot").className = "dot bad"; $("ready-text").textContent = "unreachable"; }
}

async function loadDatabases(selectId) {
  const sel = $("database");
  try {
    const r = await fetch("/v1/databases", { headers: headers() });
    const body = await r.json();
    if (!r.ok) {
      state.needsKey = body.code === "UNAUTHORIZED";
      if (state.needsKey) { sel.innerHTML = ""; const o = el("option", null, "API key needed to list the databases"); o.value = ""; sel.appendChild(o); }
      banner("error", state.needsKey ? KEY_NEEDED : body.code + ": " + body.message); return;
    }
    state.needsKey = false;
    clearBanner();
    const keep = selectId || sel.value;
    sel.innerHTML = "";
    if (body.databases.length === 0) { const o = el("option", null, "no databases yet: upload one"); o.value = ""; sel.appendChild(o); }
    for (const db of body.databases) {
      const o = el("option", null, db.name + "  (" + db.tables.length + " tables" + (db.source === "upload" ? ", upload" : db.source === "postgres" ? ", PostgreSQL" : "") + ")");
      o.value = db.id; sel.appendChild(o);
    }
    if (keep && body.databases.some((d) => d.id === keep)) sel.value = keep;
    sel._dbs = body.databases;
    showTables();
  } catch (e) { banner("error", "Cannot list databases: " + e.message); }
}

const KEY_NEEDED = "This server needs an API key: enter it under API key, then the databases appear.";
const EXAMPLES = ${JSON.stringify(EXAMPLES).replace(/</g, "\\u003c")};
const REWRITES = ${JSON.stringify(REWRITES).replace(/</g, "\\u003c")};
function selectedDb() { const sel = $("database"); return (sel._dbs || []).find((d) => d.id === sel.value); }
function showTables() {
  const db = selectedDb();
  $("tables").textContent = db ? "Tables: " + db.tables.join(", ") : "";
  const example = db && EXAMPLES[db.name];
  $("example").hidden = !example;
  $("question").placeholder = db ? (example ? example.question : (db.tables.length ? "e.g. How many rows are in " + db.tables[0] + "?" : "This database has no tables.")) : "Pick a database, then ask about it.";
}

async function upload(file) {
  const r = await fetch("/v1/databases?name=" + encodeURIComponent(file.name), { method: "POST", headers: headers({ "Content-Type": "application/octet-stream" }), body: file });
  const body = await r.json();
  if (!r.ok) { banner("error", body.code + ": " + body.message); return; }
  banner("info", "Uploaded " + body.name + " with " + body.tables.length + " tables.");
  await loadDatabases(body.id);
}

function table(result) {
  if (!result) return el("div", "empty", "no result");
  const wrap = el("div", "table-wrap"); const t = el("table", "result");
  const head = el("tr"); for (const c of result.columns) head.appendChild(el("th", null, c));
  const thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
  const tb = el("tbody");
  for (const row of result.rows.slice(0, 50)) {
    const tr = el("tr");
    for (const v of row) { const text = v === null ? "NULL" : typeof v === "object" ? "<blob " + v.base64.length + " b64>" : String(v); const td = el("td", null, text); td.title = text; tr.appendChild(td); }
    tb.appendChild(tr);
  }
  t.appendChild(tb); wrap.appendChild(t);
  const box = el("div"); box.appendChild(wrap);
  const n = result.rowCount !== undefined ? result.rowCount : result.rows.length;
  if (n === 0) box.appendChild(el("div", "hint", "empty result"));
  else if (result.truncated || n > 50) box.appendChild(el("div", "hint", "showing " + Math.min(50, result.rows.length) + " of " + n + (result.truncated ? "+" : "") + " rows"));
  return box;
}

function node(path, parent) {
  let n = state.nodes.get(path);
  if (n) return n;
  const box = el("div", "node"); box.dataset.path = path;
  const head = el("div", "node-head"); head.appendChild(el("span", "path", path));
  const badges = el("span", "badges"); head.appendChild(badges);
  const count = el("span", "counter", ""); head.appendChild(count);
  const text = el("pre", "text"); const tnode = document.createTextNode(""); text.appendChild(tnode);
  const probes = el("div"); const extra = el("div"); const children = el("div", "children");
  box.append(head, text, probes, extra, children);
  n = { path, box, badges, count, text, tnode, probes, extra, children, steps: new Map(), tokens: 0 };
  state.nodes.set(path, n);
  const parentNode = parent !== null && parent !== undefined ? state.nodes.get(parent) : null;
  (parentNode ? parentNode.children : $("tree")).appendChild(box);
  $("tree-empty").style.display = "none";
  return n;
}

function badge(n, text, cls) { const p = el("span", "pill " + (cls || ""), text); n.badges.appendChild(p); return p; }

function onEvent(ev) {
  state.events++;
  $("event-count").textContent = state.events + " events";
  switch (ev.type) {
    case "branch": { const n = node(ev.path, ev.parent); if (ev.depth !== undefined && !n.depthShown) { n.depthShown = true; badge(n, "depth " + ev.depth); } break; }
    case "token": { const n = node(ev.path); n.tnode.appendData(ev.text); n.tokens++; n.count.textContent = n.tokens + " tok"; n.text.scrollTop = n.text.scrollHeight; break; }
    case "probe": {
      const n = node(ev.path); const p = el("div", "probe");
      const h = el("div", "probe-head"); h.appendChild(el("strong", null, (ev.retried ? "final SQL failed, asked again as probe " : "probe ") + ev.step)); p.appendChild(h);
      p.appendChild(el("pre", null, ev.sql)); n.probes.appendChild(p); n.steps.set(ev.step, p); break;
    }
    case "result": {
      const n = node(ev.path); let p = n.steps.get(ev.step);
      if (!p) { p = el("div", "probe"); n.probes.appendChild(p); }
      if (ev.result.ok) { const h = p.querySelector(".probe-head"); if (h) h.appendChild(el("span", null, ev.result.rowCount + " rows · " + Math.round(ev.result.elapsedMs) + " ms")); p.appendChild(table(ev.result)); }
      else p.appendChild(el("div", "err", ev.result.error.code + ": " + ev.result.error.message));
      break;
    }
    case "repair": {
      const n = node(ev.path); const p = el("div", "probe");
      const said = [];
      for (const r of REWRITES) {
        const fixes = ev[r.field];
        if (fixes && fixes.length > 0) said.push(r.says + ": " + fixes.map((f) => (f.from ? f.from + " → " : "+ ") + f.to).join(", "));
      }
      const h = el("div", "probe-head"); h.appendChild(el("strong", null, said.join("; "))); p.appendChild(h);
      p.appendChild(el("pre", null, ev.repaired)); n.probes.appendChild(p); break;
    }
    case "rebind": {
      const n = node(ev.path); const p = el("div", "probe"); const h = el("div", "probe-head");
      h.appendChild(el("strong", null, "FROM drawn again" + (ev.columns.length ? ": " + ev.columns.join(", ") + " named after it, in none of its tables" : ": a join condition named a column its tables lack"))); p.appendChild(h);
      p.appendChild(el("pre", null, ev.sql)); n.probes.appendChild(p); break;
    }
    case "prune": { const n = node(ev.path); n.box.classList.add("pruned"); badge(n, "pruned: " + ev.reason.replace(/_/g, " ")); break; }
    case "candidate": {
      const n = node(ev.path); state.candidates.set(ev.index, n);
      const c = el("div", "candidate"); c.appendChild(el("strong", null, "candidate #" + ev.index + " "));
      if (ev.sql) { c.appendChild(el("code", null, ev.sql)); }
      else c.appendChild(el("span", "empty", ev.answerable ? "no SQL" : "unanswerable"));
      if (!ev.ok) { n.box.classList.add("failed"); c.appendChild(el("div", "err", ev.error || "failed")); }
      n.extra.appendChild(c); badge(n, "candidate #" + ev.index, ev.ok ? "ok" : "bad"); break;
    }
    case "vote": {
      for (const g of ev.groups) for (const m of g.members) { const n = state.candidates.get(m); if (n) badge(n, g.votes + (g.votes === 1 ? " vote" : " votes"), "accent"); }
      if (ev.winner !== null && state.candidates.get(ev.winner)) { const w = state.candidates.get(ev.winner); w.box.classList.add("winner"); badge(w, "winner", "ok"); }
      break;
    }
    case "final": { $("final-sql").textContent = ev.sql || (ev.answerable ? "(no SQL)" : "unanswerable" + (ev.reason ? ": " + ev.reason : "")); break; }
    case "error": {
      if (ev.terminal) { banner("error", ev.code + ": " + ev.message); $("final-sql").textContent = "no answer (" + ev.code + ")"; }
      else if (ev.path) { const n = node(ev.path); n.box.classList.add("failed"); badge(n, ev.code, "bad"); }
      break;
    }
    case "done": renderAnswer(ev.answer); break;
  }
}

function renderAnswer(a) {
  $("final-sql").textContent = a.sql || (a.answerable ? "(no SQL)" : "unanswerable" + (a.reason ? ": " + a.reason : ""));
  const meta = $("final-meta"); meta.innerHTML = "";
  const pill = (t, c) => meta.appendChild(el("span", "pill " + (c || ""), t));
  pill(a.answerable ? "answerable" : "no answer", a.answerable ? "ok" : "bad");
  if (typeof a.confidence === "number") pill("confidence " + a.confidence.toFixed(2), a.answerable ? "accent" : "bad");
  if (!a.answerable && a.reason && a.sql) meta.appendChild(el("div", "err", a.reason));
  else if (a.doubts && a.doubts.length) meta.appendChild(el("div", "empty", "doubts: " + a.doubts.join("; ")));
  if (a.notice) meta.appendChild(el("div", "err", a.notice));
  pill(a.candidates.length + " candidates");
  const w = a.winner === null ? undefined : a.candidates.find((c) => c.index === a.winner);
  if (w && a.decidedBy === "fallback-logprob") {
    pill("no candidate's SQL ran: picked by log-probability", "bad");
    if (w.error) meta.appendChild(el("div", "err", "why the winner did not run: " + w.error));
  } else if (w) pill(w.votes + (w.votes === 1 ? " vote" : " votes") + " for the winner", "accent");
  pill(a.usage.generatedTokens + " generated tokens");
  pill(Math.round(a.timings.totalMs) + " ms");
  if (a.examples && a.examples.length) meta.appendChild(el("div", "empty", "verified examples shown: " + a.examples.map((x) => x.question + " (" + x.score.toFixed(2) + ")").join("; ")));
  if (a.conversation) meta.appendChild(el("div", "empty", "turn " + a.conversation.turn + " of the conversation; " + a.conversation.turnsShown + " earlier turns shown"));
  const r = $("final-result"); r.innerHTML = ""; r.appendChild(a.result ? table(a.result) : el("div", "empty", "no result table"));
  state.answer = a.answerId ? { id: a.answerId, database: state.askedDb, sql: a.sql } : null;
  $("teach").hidden = !state.answer; $("right-sql").hidden = true; $("save-sql").hidden = true; teachNote("", "");
  $("right-sql").value = a.sql || "";
  if (a.conversation) { state.thread.push({ question: state.askedQuestion, sql: a.sql }); showThread(); }
}

function teachNote(kind, text) { const n = $("teach-note"); n.className = "teach-note " + kind; n.textContent = text; }

/** Stores the answer as right ({answerId}) or its question with the right SQL ({answerId, sql}), as POST /v1/databases/:id/examples. */
async function teach(sql) {
  const a = state.answer; if (!a) return;
  const body = sql === undefined ? { answerId: a.id } : { answerId: a.id, sql };
  const r = await fetch("/v1/databases/" + encodeURIComponent(a.database) + "/examples", { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
  const j = await r.json().catch(() => ({}));
  if (r.ok) teachNote("ok", "Stored as verified example " + j.id + " (" + j.rowCount + " rows): similar questions on this database will show it to the model.");
  else teachNote("bad", (j.code || r.status) + ": " + (j.message || "not stored"));
}

function showThread() {
  const t = $("thread"); t.innerHTML = "";
  if (!state.conversation || state.thread.length === 0) { t.hidden = true; return; }
  t.hidden = false; t.appendChild(el("div", "", "Conversation " + state.conversation + ":"));
  const ol = el("ol"); for (const turn of state.thread) { const li = el("li", "", turn.question + " → "); li.appendChild(el("code", "", turn.sql || "(no SQL)")); ol.appendChild(li); }
  t.appendChild(ol);
}

function newConversation() { state.conversation = $("follow").checked ? "pg-" + Math.random().toString(36).slice(2, 12) : null; state.thread = []; showThread(); }

function reset() {
  state.nodes.clear(); state.candidates.clear(); state.events = 0;
  $("tree").innerHTML = ""; $("tree-empty").style.display = "";
  $("final-sql").textContent = "…"; $("final-meta").innerHTML = ""; $("final-result").innerHTML = ""; $("event-count").textContent = "";
  clearBanner();
}

function ask(ev) {
  if (ev) ev.preventDefault();
  const database = $("database").value;
  const question = $("question").value.trim();
  if (!database) { banner("error", state.needsKey ? KEY_NEEDED : "Pick or upload a database first."); if (state.needsKey) $("key").focus(); return; }
  if (!question) { banner("error", "Type a question."); return; }
  reset();
  const req = { database, question, strategy: $("strategy").value };
  const hint = $("evidence").value.trim(); if (hint) req.evidence = hint;
  const profile = $("profile").value; if (profile) req.profile = profile;
  if (req.strategy !== "greedy") req.candidates = Number($("candidates").value) || 4;
  const seed = $("seed").value.trim(); if (seed !== "") req.seed = Number(seed);
  if (state.conversation) req.conversation = state.conversation;
  state.askedDb = database; state.askedQuestion = question;
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const k = apiKey();
  const ws = new WebSocket(proto + "//" + location.host + "/v1/stream" + (k ? "?key=" + encodeURIComponent(k) : ""));
  state.ws = ws; $("ask").disabled = true; $("cancel").disabled = false; $("ask").textContent = "Thinking…";
  ws.onopen = () => ws.send(JSON.stringify(req));
  ws.onmessage = (m) => { try { onEvent(JSON.parse(m.data)); } catch (e) { console.error(e); } };
  ws.onclose = (c) => {
    if (state.ws === ws) state.ws = null;
    $("ask").disabled = false; $("cancel").disabled = true; $("ask").textContent = "Ask";
    if (c.code !== 1000 && c.code !== 1001 && !$("banner").classList.contains("error")) banner("error", "The stream closed (" + c.code + (c.reason ? ": " + c.reason : "") + ").");
  };
}

function cancel() { if (state.ws && state.ws.readyState === 1) state.ws.send(JSON.stringify({ type: "cancel" })); }

window.addEventListener("DOMContentLoaded", () => {
  $("key").value = localStorage.getItem("reex.apiKey") || "";
  $("key").addEventListener("change", () => { localStorage.setItem("reex.apiKey", apiKey()); loadDatabases(); });
  $("database").addEventListener("change", showTables);
  $("example").addEventListener("click", () => {
    const db = selectedDb(); const example = db && EXAMPLES[db.name];
    if (example) { $("question").value = example.question; $("evidence").value = example.evidence; }
  });
  $("refresh").addEventListener("click", () => loadDatabases());
  $("file").addEventListener("change", (e) => { const f = e.target.files[0]; if (f) upload(f); e.target.value = ""; });
  $("strategy").addEventListener("change", () => { $("candidates").disabled = $("strategy").value === "greedy"; });
  $("form").addEventListener("submit", ask);
  $("cancel").addEventListener("click", cancel);
  $("candidates").disabled = $("strategy").value === "greedy";
  $("follow").addEventListener("change", newConversation);
  $("new-conversation").addEventListener("click", newConversation);
  $("is-right").addEventListener("click", () => teach());
  $("is-wrong").addEventListener("click", () => { $("right-sql").hidden = false; $("save-sql").hidden = false; $("right-sql").focus(); });
  $("save-sql").addEventListener("click", () => { const sql = $("right-sql").value.trim(); if (sql) teach(sql); else teachNote("bad", "Type the right SQL first."); });
  checkReady(); setInterval(checkReady, 10000);
  loadDatabases();
});
`;

const BODY = /* html */ `
<header>
  <h1>re<span>ex</span> playground</h1>
  <span class="tagline">execution-aware text-to-SQL: watch the model probe the database while it reasons</span>
  <span class="status"><span id="ready-dot" class="dot"></span><span id="ready-text">checking…</span></span>
</header>
<main>
  <form id="form" class="card" autocomplete="off">
    <h2>Ask</h2>
    <label for="database">Database</label>
    <div class="row"><select id="database"></select><button type="button" id="refresh" class="shrink" title="Reload the list">↻</button></div>
    <div id="tables" class="hint"></div>
    <label for="file">Upload a SQLite file</label>
    <input type="file" id="file" accept=".sqlite,.sqlite3,.db,application/vnd.sqlite3,application/octet-stream">
    <label for="question">Question <button type="button" id="example" class="link" hidden title="Fill in this example database's first question and its hint">try the example</button></label>
    <textarea id="question" rows="3" placeholder="Pick a database, then ask about it."></textarea>
    <label for="evidence">Hint (optional)</label>
    <textarea id="evidence" rows="2" placeholder="e.g. older than 30 refers to age &gt; 30"></textarea>
    <div class="row">
      <div><label for="strategy">Strategy</label>
        <select id="strategy">${STRATEGY_OPTIONS}</select></div>
      <div><label for="candidates">Candidates</label><input type="number" id="candidates" min="1" max="32" value="4"></div>
      <div><label for="seed">Seed</label><input type="number" id="seed" min="0" step="1" placeholder="random" title="Sampling seed: the same seed gives the same answer"></div>
    </div>
    <label for="profile">Model profile <span style="font-weight:400">(the protocol the model was trained on)</span></label>
    <select id="profile"><option value="" id="profile-default" selected>server default</option>${PROFILE_OPTIONS}</select>
    <label for="key">API key <span style="font-weight:400">(only if the server needs one; kept in this browser)</span></label>
    <input type="password" id="key" placeholder="Bearer key">
    <label><input type="checkbox" id="follow"> Follow-ups: keep a conversation (each answer sees the earlier ones) <button type="button" id="new-conversation" class="link">new conversation</button></label>
    <div class="actions"><button type="submit" id="ask" class="primary">Ask</button><button type="button" id="cancel" disabled>Cancel</button></div>
  </form>
  <div class="right">
    <div id="model-note" class="banner" role="note"></div>
    <div id="banner" class="banner"></div>
    <section class="card" id="answer">
      <h2>Answer</h2>
      <div id="thread" class="thread" hidden></div>
      <pre id="final-sql" class="answer-sql">Ask a question to see the SQL here.</pre>
      <div id="final-meta" class="meta"></div>
      <div id="teach" class="teach" hidden>
        <button type="button" id="is-right" title="Store this question and SQL as a verified example of the database">This is right</button>
        <button type="button" id="is-wrong" title="Give the right SQL; it is run, and stored with this question when it runs">This is wrong → right SQL</button>
        <textarea id="right-sql" rows="3" hidden placeholder="The right SQL"></textarea>
        <button type="button" id="save-sql" class="primary" hidden>Save the right SQL</button>
        <span id="teach-note" class="teach-note"></span>
      </div>
      <div id="final-result"></div>
    </section>
    <section class="card">
      <div class="row" style="margin-bottom:12px"><h2 style="margin:0">Decoding tree</h2><span id="event-count" class="counter shrink"></span></div>
      <div id="tree-empty" class="empty">Branches, probes and their results appear here as the model works.</div>
      <div id="tree" class="tree"></div>
    </section>
  </div>
</main>
`;

/** The complete playground document. */
export const PLAYGROUND_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>reex playground</title>
<style>${CSS}</style>
</head>
<body>${BODY}
<script>${SCRIPT}</script>
</body>
</html>
`;
