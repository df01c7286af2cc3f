// turnback's web page: sessions, the history tree of a session with its call blocks, and taking changes back.
// Every take-back is planned by the server first, shown in a modal dialog, and applied with that plan's id.

import { api, listen } from "./api.js";
import { splitView, unifiedView } from "./diff.js";
import { ask, element } from "./dom.js";
import { language, loadWords, t } from "./words.js";

const state = {
  sessions: [],
  session: null, // the open session's id
  view: "history", // or "files"
  history: null,
  files: null,
  status: null,
  connected: false,
  working: false,
  details: new Map(), // call id -> GET calls/{id} answer
  expanded: new Set(),
  inputs: new Set(), // calls whose raw input is shown
  split: false,
  notice: null, // {text, alert}
};

const $ = (id) => document.getElementById(id);

// -- what may be done now ------------------------------------------------------------------------------------------

/** Why the action buttons are disabled now, or "" when they are not. */
function blockedReason() {
  if (!state.connected) return t("web_disconnected");
  if (state.working) return t("web_working");
  const busy = state.status?.busy ?? [];
  if (busy.length) return t("web_busy", { reason: busy.map((b) => b.message ?? b).join("; ") });
  const running = (state.history?.turns ?? []).find((turn) => turn.status === "running");
  if (running || state.status?.running_turns?.length) {
    const number = running ? running.number : "";
    return t("web_busy", { reason: t("web_turn", { number }) + " · " + t("mark_running") });
  }
  return "";
}

function updateBlocked() {
  const reason = blockedReason();
  const banner = $("busy");
  banner.hidden = !reason;
  banner.textContent = reason;
  for (const button of document.querySelectorAll("button.action")) {
    button.disabled = Boolean(reason);
    if (reason) {
      button.title = reason;
      button.setAttribute("aria-describedby", "busy");
    } else {
      button.removeAttribute("title");
      button.removeAttribute("aria-describedby");
    }
  }
}

/** A button that acts on the session: disabled, with the reason, while that cannot be done (see updateBlocked). */
function action(label, onclick, attributes = {}) {
  const classes = ("action " + (attributes.class ?? "")).trim();
  return element("button", { type: "button", ...attributes, class: classes, onclick }, label);
}

// -- loading -------------------------------------------------------------------------------------------------------

async function loadSessions() {
  const answer = await api("sessions");
  if (answer.ok) state.sessions = answer.data.sessions ?? [];
  renderSessions();
}

// While a load is in flight the session is about to be re-rendered: aria-busy tells assistive technology (and a
// test) that its buttons are about to be replaced, so a click now may land on a button that is gone.
let loadsInFlight = 0;

async function loadSession() {
  if (!state.session) return;
  loadsInFlight += 1;
  $("session").setAttribute("aria-busy", "true");
  try {
    await readSession();
  } finally {
    loadsInFlight -= 1;
    if (!loadsInFlight) $("session").removeAttribute("aria-busy");
  }
}

async function readSession() {
  const id = encodeURIComponent(state.session);
  const [history, status, files] = await Promise.all([
    api(`sessions/${id}/history`),
    api(`sessions/${id}/status`),
    state.view === "files" ? api(`sessions/${id}/files`) : Promise.resolve(null),
  ]);
  state.history = history.ok ? history.data : null;
  state.status = status.ok ? status.data : null;
  if (files) state.files = files.ok ? (files.data.files ?? []) : [];
  if (!history.ok) note(errorText(history), true);
  // A call's detail may have changed (reverted, a later call): re-read the expanded ones.
  state.details.clear();
  await Promise.all([...state.expanded].map((call) => loadCall(call)));
  renderSession();
}

async function loadCall(callId) {
  const answer = await api(`sessions/${encodeURIComponent(state.session)}/calls/${encodeURIComponent(callId)}`);
  if (answer.ok) state.details.set(callId, answer.data.call ?? answer.data);
}

let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    await loadSessions();
    await loadSession();
  }, 120);
}

// -- sessions ------------------------------------------------------------------------------------------------------

function renderSessions() {
  const list = $("session-list");
  list.replaceChildren();
  if (!state.sessions.length) list.append(element("li", { class: "hint" }, t("web_no_sessions")));
  for (const session of state.sessions) {
    const when = new Date(session.active_at / 1e6).toLocaleString(language());
    const link = element(
      "a",
      {
        href: "#s=" + session.id,
        "aria-current": session.id === state.session ? "page" : null,
        "data-session": session.id,
      },
      element("span", { class: "session-title" }, session.title || session.id.slice(0, 16)),
      element("span", { class: "session-root" }, session.project?.root ?? ""),
      element("span", { class: "session-meta" }, when),
    );
    list.append(element("li", {}, link));
  }
}

// -- the session: history tree or files ----------------------------------------------------------------------------

function renderSession() {
  const root = $("session");
  const focused = document.activeElement?.dataset?.focus;
  root.replaceChildren();
  if (!state.session) {
    root.append(element("p", { class: "hint" }, t("web_choose_session")));
    return;
  }
  const tabs = element("div", { class: "tabs", role: "tablist" });
  for (const [view, code] of [
    ["history", "web_history"],
    ["files", "web_files"],
  ]) {
    tabs.append(
      element(
        "button",
        {
          type: "button",
          role: "tab",
          "aria-selected": String(state.view === view),
          "data-focus": "tab-" + view,
          onclick: () => openSession(state.session, view),
        },
        t(code),
      ),
    );
  }
  root.append(tabs);
  if (state.notice) {
    root.append(
      element(
        "p",
        { class: state.notice.alert ? "notice alert" : "notice", role: state.notice.alert ? "alert" : "status" },
        state.notice.text,
      ),
    );
  }
  root.append(state.view === "files" ? renderFiles() : renderHistory());
  updateBlocked();
  if (focused) document.querySelector(`[data-focus="${CSS.escape(focused)}"]`)?.focus();
}

function renderFiles() {
  const list = element("ul", { class: "files" });
  if (state.files === null) list.append(element("li", { class: "hint" }, t("web_loading")));
  else if (!state.files.length) list.append(element("li", { class: "hint" }, t("no_files_changed")));
  for (const file of state.files ?? []) {
    list.append(
      element("li", {}, element("code", {}, file.path), element("span", { class: "file-state" }, file.state)),
    );
  }
  return list;
}

function renderHistory() {
  const history = state.history;
  const tree = element("div", { class: "tree" });
  if (!history) return tree;
  const turns = [...history.turns].sort((a, b) => b.number - a.number);
  if (!turns.length) tree.append(element("p", { class: "hint" }, t("no_turns_yet")));
  for (const turn of turns) tree.append(renderTurn(turn));
  return tree;
}

function renderTurn(turn) {
  const marks = [];
  if (turn.head) marks.push(t("mark_head"));
  if (turn.branch === "abandoned") marks.push(t("mark_abandoned"));
  if (turn.branch === "resent") marks.push(t("mark_resent"));
  if (turn.status === "running") marks.push(t("mark_running"));
  if (turn.partly_undone) marks.push(t("mark_partly_undone"));
  else if (turn.undone) marks.push(t("mark_undone"));
  const classes = ["turn", "branch-" + turn.branch];
  if (turn.head) classes.push("head");
  if (turn.undone) classes.push("undone");
  const buttons = element("div", { class: "turn-actions" });
  // Redo takes back the newest undo, revert or rollback (its preview says which files it puts back).
  // Only the turn a plain undo takes now offers it (the engine's stack rule: `undo_next`).
  if (turn.undo_next) buttons.append(action(t("web_undo"), () => undo(turn), { "data-focus": "undo-" + turn.number }));
  if (turn.undone) buttons.append(action(t("web_redo"), () => redo(), { "data-focus": "redo-" + turn.number }));
  if (!turn.head && turn.branch !== "resent") {
    buttons.append(
      action(t("web_rollback_to", { number: turn.number }), () => rollback(turn), {
        "data-focus": "rollback-" + turn.number,
      }),
    );
  }
  if (turn.branch === "active" && !turn.undone) {
    buttons.append(action(t("web_edit_and_resend"), () => resend(turn), { "data-focus": "resend-" + turn.number }));
  }
  const calls = element("ol", { class: "calls" });
  for (const call of turn.calls) calls.append(renderCall(call, turn));
  if (!turn.calls.length) calls.append(element("li", { class: "hint" }, t("web_no_calls")));
  return element(
    "article",
    {
      class: classes.join(" "),
      "data-turn": turn.number,
      "data-turn-id": turn.id,
      "aria-labelledby": "turn-" + turn.id,
    },
    element(
      "header",
      { class: "turn-header" },
      element("h3", { id: "turn-" + turn.id }, t("web_turn", { number: turn.number })),
      element("span", { class: "turn-message" }, turn.message ?? ""),
      marks.length ? element("span", { class: "marks" }, marks.join(" · ")) : null,
      buttons,
    ),
    calls,
  );
}

// -- call blocks ---------------------------------------------------------------------------------------------------

function toolName(call) {
  const tool = (call.tool ?? "").toLowerCase();
  if (call.kind === "job") return t("web_tool_job");
  if (call.kind === "command" || ["exec", "bash", "powershell", "run_command"].includes(tool))
    return t("web_tool_command");
  if (["edit", "multiedit", "notebookedit", "edit_file"].includes(tool)) return t("web_tool_edit");
  if (["write", "write_file"].includes(tool)) return t("web_tool_write");
  return t("web_tool_other", { tool: call.tool });
}

/**
 * What the call acted on: its command or paths (the server's title without the tool word; else, as for a command
 * whose text went with its input under the store's cap, its paths).
 */
function targetOf(call) {
  const space = (call.title ?? "").indexOf(" ");
  const titled = (space > 0 ? call.title.slice(space + 1) : (call.title ?? "")).trim();
  if (titled) return titled;
  return call.changes.map((change) => (change.from ? `${change.from} → ${change.path}` : change.path)).join(", ");
}

// The states `log` gives a call (its codes), as the page's badges word them.
const STATE_WORDS = {
  call_status_cut_short: ["cut_short", "web_state_cut_short"],
  call_status_failed: ["failed", "web_state_failed"],
  call_status_evicted: ["evicted", "web_state_evicted"],
  call_status_reverted: ["reverted", "label_reverted"],
};

/** Every change of the call was taken back (by a revert, or by the undo of its whole turn). */
function isReverted(call) {
  return call.changes.length > 0 && call.changes.every((change) => change.reverted);
}

/** `[[code, words], …]`: the call's states as the server gives them, else "applied" (or running). */
function statesOf(call) {
  const states = (call.states ?? []).map((state) => {
    // A call the user said no to failed with that answer: the server marks it denied.
    if (call.denied && STATE_WORDS[state.code]?.[0] === "failed") return ["denied", t("web_state_denied")];
    const known = STATE_WORDS[state.code];
    return known ? [known[0], t(known[1])] : [state.code, state.message.replace(/^\s*\((.*)\)$/, "$1")];
  });
  if (isReverted(call) && !states.some(([code]) => code === "reverted")) states.push(["reverted", t("label_reverted")]);
  if (call.changes.some((change) => change.not_covered)) states.push(["not_covered", t("web_state_not_covered")]);
  if (call.status === "running") states.push(["running", t("web_state_running")]);
  return states.length ? states : [["applied", t("web_state_applied")]];
}

function renderCall(call, turn) {
  const expanded = state.expanded.has(call.id);
  const states = statesOf(call);
  const counts = call.added !== undefined ? t("web_added_removed", { added: call.added, removed: call.removed }) : "";
  const canRevert = call.revertible && !isReverted(call) && turn.branch !== "resent";
  const header = element(
    "div",
    { class: "call-header" },
    element(
      "button",
      {
        type: "button",
        class: "call-toggle",
        "aria-expanded": String(expanded),
        "aria-controls": "body-" + call.id,
        "data-focus": "toggle-" + call.id,
        onclick: () => toggleCall(call.id),
      },
      element("span", { class: "tool" }, toolName(call)),
      element("code", { class: "target" }, targetOf(call)),
      states.map(([code, words]) => element("span", { class: "state state-" + code }, words)),
      counts ? element("span", { class: "counts" }, counts) : null,
    ),
    canRevert
      ? action("↶", () => revert(call), {
          class: "revert-icon",
          "aria-label": t("label_revert"),
          "data-focus": "icon-" + call.id,
        })
      : null,
  );
  const classes = ["call", ...states.map(([code]) => "state-" + code)].join(" ");
  const block = element("li", { class: classes, "data-call-id": call.id, id: "call-" + call.id }, header);
  if (expanded) block.append(renderCallBody(call, canRevert));
  return block;
}

function renderCallBody(call, canRevert) {
  const detail = state.details.get(call.id);
  const body = element("div", { class: "call-body", id: "body-" + call.id });
  if (!detail) {
    body.append(element("p", { class: "hint" }, t("web_loading")));
    return body;
  }
  const tools = element(
    "div",
    { class: "diff-switch", role: "group" },
    element(
      "button",
      {
        type: "button",
        "aria-pressed": String(!state.split),
        "data-focus": "unified-" + call.id,
        onclick: () => setSplit(false),
      },
      t("web_unified"),
    ),
    element(
      "button",
      {
        type: "button",
        "aria-pressed": String(state.split),
        "data-focus": "split-" + call.id,
        onclick: () => setSplit(true),
      },
      t("web_split"),
    ),
  );
  body.append(tools);
  for (const diff of detail.diffs ?? []) body.append(renderFileDiff(diff));
  if (!detail.diffs && detail.diff) body.append(renderFileDiff({ path: "", lines: detail.diff.split("\n") }));
  const showing = state.inputs.has(call.id);
  if (showing) body.append(element("pre", { class: "input" }, prettyInput(detail)));
  const buttons = element(
    "div",
    { class: "call-actions" },
    element(
      "button",
      {
        type: "button",
        "aria-expanded": String(showing),
        "data-focus": "input-" + call.id,
        onclick: () => toggleInput(call.id),
      },
      showing ? t("web_hide_input") : t("web_show_input"),
    ),
    canRevert
      ? action(t("label_revert"), () => revert(call), { class: "primary", "data-focus": "revert-" + call.id })
      : null,
  );
  body.append(buttons);
  return body;
}

function prettyInput(detail) {
  if (detail.input === null || detail.input === undefined)
    return detail.input_missing?.message ?? t("no_input_recorded");
  try {
    return JSON.stringify(JSON.parse(detail.input), null, 2);
  } catch {
    return detail.input;
  }
}

function renderFileDiff(diff) {
  const section = element("section", { class: "file-diff" });
  if (diff.path) {
    const counts =
      diff.binary || diff.too_large
        ? ""
        : t("web_added_removed", { added: diff.added ?? 0, removed: diff.removed ?? 0 });
    section.append(
      element(
        "h4",
        {},
        element("code", {}, diff.path),
        diff.kind ? " " + t("kind_" + diff.kind) : "",
        counts ? " " + counts : "",
      ),
    );
  }
  if (diff.hidden) section.append(element("p", { class: "hint" }, t("ignored_not_shown")));
  else if (diff.lines?.length) section.append(state.split ? splitView(diff.lines) : unifiedView(diff.lines));
  // A binary or oversized file, a link or a mode change: the server's words instead of lines.
  else if (diff.note)
    section.append(element("p", { class: diff.binary || diff.too_large ? "hint binary" : "hint" }, diff.note));
  return section;
}

async function toggleCall(callId) {
  if (state.expanded.has(callId)) state.expanded.delete(callId);
  else {
    state.expanded.add(callId);
    renderSession();
    await loadCall(callId);
  }
  renderSession();
}

function toggleInput(callId) {
  if (state.inputs.has(callId)) state.inputs.delete(callId);
  else state.inputs.add(callId);
  renderSession();
}

function setSplit(split) {
  state.split = split;
  renderSession();
}

/** Opens the block of call `callId` (the link from a conflict to the later call that wrote the file). */
async function showCall(callId) {
  state.expanded.add(callId);
  await loadCall(callId);
  renderSession();
  const block = document.querySelector(`[data-call-id="${CSS.escape(callId)}"]`);
  block?.scrollIntoView({ block: "center" });
  block?.querySelector(".call-toggle")?.focus();
}

// -- taking back ---------------------------------------------------------------------------------------------------

/** A refusal's words: the CLI's error object the server answers with. */
function errorText(answer) {
  return answer.data.error?.message ?? answer.data.message ?? String(answer.status);
}

function note(text, alert = false) {
  state.notice = text ? { text, alert } : null;
}

/** POSTs `body` to `path` with the buttons disabled meanwhile; a refusal is shown, and null returned. */
async function post(path, body) {
  state.working = true;
  updateBlocked();
  const answer = await api(`sessions/${encodeURIComponent(state.session)}/${path}`, body);
  state.working = false;
  updateBlocked();
  if (!answer.ok) {
    note(errorText(answer), true);
    renderSession();
    return null;
  }
  return answer.data;
}

async function finished(result) {
  note(result ? (result.message ?? t("web_done")) : null, false);
  await loadSession();
}

/** The full id of the later call a conflict row names (the server gives its short id), if the page shows it. */
function laterCall(row) {
  if (!row.later_call) return null;
  for (const turn of state.history?.turns ?? []) {
    for (const call of turn.calls) if (call.id.startsWith(row.later_call)) return call.id;
  }
  return null;
}

// A plan row's action (its code in the plan) as the CLI's preview words it.
const ACTION_WORDS = {
  restore: "action_restore",
  trash: "action_trash",
  skip: "action_skip",
  "not covered": "action_not_covered",
  mark: "action_mark",
  ref: "action_ref",
};

/** The plan's rows: action, path, its +/- lines (a rollback's `files`), why, and the diff it writes back. */
function planRows(plan, host, call) {
  const rows = element("div", { class: "plan-rows" });
  const counts = new Map((plan.files ?? []).filter((file) => !file.binary).map((file) => [file.path, file]));
  for (const row of plan.rows) {
    const conflict = Boolean(row.conflict);
    const item = element("section", { class: "plan-row" + (conflict ? " conflict" : "") });
    const lines = counts.get(row.path);
    item.append(
      element(
        "p",
        {},
        element("span", { class: "row-action" }, ACTION_WORDS[row.action] ? t(ACTION_WORDS[row.action]) : row.action),
        " ",
        element("code", {}, row.path),
        lines
          ? element(
              "span",
              { class: "counts" },
              " " + t("web_added_removed", { added: lines.added, removed: lines.removed }),
            )
          : null,
        row.message ? " — " + row.message : "",
      ),
    );
    if (conflict && call) {
      item.append(element("p", {}, t("web_conflict", { path: row.path })));
      const later = laterCall(row);
      if (later) {
        const link = element(
          "a",
          { href: "#call-" + later, class: "later-call" },
          t("web_written_later_by", { call: later.slice(0, 16) }),
        );
        link.addEventListener("click", (event) => {
          event.preventDefault();
          link.closest("dialog")?.querySelector("button.cancel")?.click();
          showCall(later);
        });
        item.append(element("p", {}, link));
      }
    }
    if (row.diff?.length) item.append(state.split ? splitView(row.diff) : unifiedView(row.diff));
    rows.append(item);
  }
  for (const extra of plan.notes ?? []) rows.append(element("p", { class: "hint" }, extra.message ?? extra));
  return rows;
}

async function revert(call) {
  const path = `calls/${encodeURIComponent(call.id)}/revert`;
  const plan = await post(path, { apply: false });
  if (!plan) return;
  const host = plan.host ?? location.hostname;
  const conflicts = plan.rows.filter((row) => row.conflict);
  const acting = plan.rows.filter((row) => ["restore", "trash"].includes(row.action));
  const buttons = [];
  // The confirming button carries the plan's action (Revert, Delete); a conflict is restored over only by an
  // anyway plan, whose action is Restore Anyway, or Delete Anyway for a file the call created.
  if (acting.length) buttons.push({ label: plan.action.message, value: "apply", primary: true });
  if (conflicts.length) {
    const deletes = conflicts.every((row) => row.created);
    buttons.push({
      label: t(deletes ? "label_delete_anyway" : "label_restore_anyway"),
      value: "anyway",
      primary: !acting.length,
    });
  }
  const single = plan.rows.length === 1 && acting.length === 1 && acting[0].created;
  const title = single ? t("web_delete_asks", { path: acting[0].path, host }) : t("web_revert_asks", { host });
  if (!buttons.length) {
    await ask({
      title: t("web_nothing_to_revert"),
      body: planRows(plan, host, call),
      buttons: [],
      cancel: t("web_close"),
    });
    return;
  }
  const choice = await ask({ title, body: planRows(plan, host, call), buttons, cancel: t("web_cancel") });
  if (choice === null) return;
  if (choice === "anyway") {
    const label = buttons.find((button) => button.value === "anyway").label;
    const paths = conflicts.map((row) => row.path).join(", ");
    const sure = await ask({
      title: t("web_anyway_asks", { path: paths }),
      body: [],
      buttons: [{ label, value: "yes", primary: true }],
      cancel: t("web_cancel"),
    });
    if (sure !== "yes") return;
  }
  const result = await post(path, { apply: true, plan: plan.plan.id, anyway: choice === "anyway" });
  if (result) await finished(result);
}

async function rollback(turn) {
  const preview = await post("rollback", { node: turn.number, apply: false });
  if (!preview) return;
  const host = preview.host ?? location.hostname;
  const body = [planRows(preview, host, null)];
  const leaving = preview.turn_numbers ?? [];
  if (leaving.length) {
    body.push(element("p", {}, t("web_turns_leave")));
    body.push(
      element(
        "ul",
        { class: "leaving" },
        leaving.map((number) => element("li", {}, t("web_turn", { number }))),
      ),
    );
  }
  const choice = await ask({
    title: t("web_rollback_asks", { number: turn.number, host }),
    body,
    buttons: [{ label: t("web_roll_back"), value: "apply", primary: true }],
    cancel: t("web_cancel"),
  });
  if (choice === null) return;
  const expectHead = preview.head ?? 0; // the head this preview saw (0: the start): a moved head is refused
  const result = await post("rollback", {
    node: turn.number,
    expect_head: expectHead,
    apply: true,
    plan: preview.plan.id,
  });
  if (result) await finished(result);
}

async function undo(turn) {
  const plan = await post("undo", { turn: turn.number, apply: false });
  if (!plan) return;
  const host = plan.host ?? location.hostname;
  const choice = await ask({
    title: t("web_undo_asks", { number: turn.number, host }),
    body: planRows(plan, host, null),
    buttons: [{ label: t("web_undo"), value: "apply", primary: true }],
    cancel: t("web_cancel"),
  });
  if (choice === null) return;
  const result = await post("undo", { apply: true, plan: plan.plan.id });
  if (result) await finished(result);
}

async function redo() {
  const plan = await post("redo", { apply: false });
  if (!plan) return;
  const choice = await ask({
    title: t("web_redo_asks"),
    body: planRows(plan, plan.host ?? location.hostname, null),
    buttons: [{ label: t("web_redo"), value: "apply", primary: true }],
    cancel: t("web_cancel"),
  });
  if (choice === null) return;
  const result = await post("redo", { apply: true, plan: plan.plan.id });
  if (result) await finished(result);
}

async function resend(turn) {
  const preview = await post("resend", { message: turn.number, choice: null });
  if (!preview) return;
  const body = [];
  const files = element("ul", { class: "resend-files" });
  for (const file of preview.files ?? []) {
    files.append(
      element(
        "li",
        {},
        element("code", {}, file.path),
        " ",
        t("web_file_calls", { count: file.calls }),
        " ",
        t("web_added_removed", { added: file.added, removed: file.removed }),
      ),
    );
  }
  body.push(files);
  // What Revert and Send cannot take back: a file changed since, and one with no copy (dropped by the store's cap
  // or left out of the snapshot). Send Anyway resends, leaving them as they are.
  const staying = preview.rows.filter((row) => ["skip", "not covered"].includes(row.action));
  for (const row of staying) {
    body.push(
      element(
        "p",
        { class: "staying" },
        element("code", {}, row.path),
        " ",
        t("web_stays_as_is", { reason: row.reason ?? row.message ?? "" }),
      ),
    );
  }
  const buttons = [
    { label: t("label_revert_and_send"), value: "revert", primary: true },
    { label: t("label_keep_files_and_send"), value: "keep" },
  ];
  if (staying.length) buttons.push({ label: t("label_send_anyway"), value: "anyway" });
  const choice = await ask({
    title: t("web_resend_asks", { number: turn.number }),
    body,
    buttons,
    cancel: t("web_cancel"),
  });
  if (choice === null) {
    await api(`sessions/${encodeURIComponent(state.session)}/resend`, {
      message: turn.number,
      choice: "cancel",
      plan: preview.plan.id,
    });
    return;
  }
  const result = await post("resend", { message: turn.number, choice, apply: true, plan: preview.plan.id });
  if (result) await finished(result);
}

// -- navigation, language, live updates ----------------------------------------------------------------------------

async function openSession(sessionId, view = "history") {
  const changed = sessionId !== state.session;
  state.session = sessionId;
  state.view = view;
  if (changed) {
    state.expanded.clear();
    state.inputs.clear();
    state.notice = null;
    state.history = null;
    state.files = null;
  }
  const wanted = "#s=" + sessionId + (view === "files" ? "&v=files" : "");
  if (location.hash !== wanted) history.replaceState(null, "", wanted);
  renderSessions();
  await loadSession();
}

function fromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const session = params.get("s");
  if (session) openSession(session, params.get("v") === "files" ? "files" : "history");
}

async function start() {
  const words = await loadWords();
  if (!words.ok) {
    // Opened without the token address (no cookie): the server's refusal says what to open, in the browser's language.
    $("session").replaceChildren(element("p", { class: "notice alert", role: "alert" }, errorText(words)));
    return;
  }
  const select = $("language");
  select.value = language();
  select.addEventListener("change", async () => {
    await loadWords(select.value);
    renderSessions();
    await loadSession();
    if (!state.session) renderSession();
  });
  $("home").addEventListener("click", (event) => {
    event.preventDefault();
    state.session = null;
    history.replaceState(null, "", location.pathname);
    renderSessions();
    renderSession();
  });
  window.addEventListener("hashchange", fromHash);
  $("session-list").addEventListener("click", (event) => {
    const link = event.target.closest("a[data-session]");
    if (!link) return;
    event.preventDefault();
    openSession(link.dataset.session);
  });
  listen({
    onOpen: () => {
      state.connected = true;
      updateBlocked();
      refreshSoon();
    },
    onLost: () => {
      state.connected = false;
      updateBlocked();
    },
    onChange: () => refreshSoon(),
  });
  await loadSessions();
  if (location.hash) fromHash();
  else if (state.sessions.length) openSession(state.sessions[0].id);
  updateBlocked();
}

start();
