// Drawing the server's unified diff lines: as they are, or side by side.

import { element } from "./dom.js";

function lineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "d-file";
  if (line.startsWith("@@")) return "d-hunk";
  if (line.startsWith("+")) return "d-add";
  if (line.startsWith("-")) return "d-del";
  if (line.startsWith("\\")) return "d-note";
  return "d-ctx";
}

/** The unified view: one row per line, coloured by its prefix. */
export function unifiedView(lines) {
  const view = element("pre", { class: "diff unified" });
  for (const line of lines) {
    view.append(element("span", { class: "d-line " + lineClass(line) }, line + "\n"));
  }
  return view;
}

/**
 * The split view: the old side left, the new side right; within a hunk a run of removed lines pairs with the run
 * of added lines that follows it.
 */
export function splitView(lines) {
  const table = element("table", { class: "diff split" });
  const body = element("tbody");
  table.append(body);
  let removed = [];
  let added = [];
  const flush = () => {
    for (let i = 0; i < Math.max(removed.length, added.length); i++) {
      body.append(row(removed[i], "d-del", added[i], "d-add"));
    }
    removed = [];
    added = [];
  };
  for (const line of lines) {
    const kind = lineClass(line);
    if (kind === "d-del") {
      if (added.length) flush();
      removed.push(line.slice(1));
    } else if (kind === "d-add") {
      added.push(line.slice(1));
    } else {
      flush();
      if (kind === "d-ctx") body.append(row(line.slice(1), "d-ctx", line.slice(1), "d-ctx"));
      else if (kind !== "d-file") body.append(wide(line, kind));
    }
  }
  flush();
  return table;
}

function cell(text, kind) {
  return element("td", { class: text === undefined ? "d-empty" : kind }, text ?? "");
}

function row(left, leftKind, right, rightKind) {
  return element("tr", {}, cell(left, leftKind), cell(right, rightKind));
}

function wide(line, kind) {
  return element("tr", {}, element("td", { class: kind, colspan: "2" }, line));
}
