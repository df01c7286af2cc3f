// The page's words: the server's catalog (GET /api/v1/messages), in the language the switch picks.

import { api, setLanguage } from "./api.js";

const STORED = "turnback.lang";
let messages = {};
let current = "en";

export const LANGUAGES = ["en", "zh-CN", "ja"];

/** The text of catalog `code` with `{name}` placeholders filled from `params`; the code itself if unknown. */
export function t(code, params = {}) {
  const text = messages[code] ?? code;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}

export function language() {
  return current;
}

/**
 * Loads the words of `lang`; without one, the language chosen earlier on this browser, else the server's pick from
 * the browser's Accept-Language. Resolves to the API's answer: a refusal (no token) comes worded by the server.
 */
export async function loadWords(lang) {
  const wanted = lang || localStorage.getItem(STORED) || "";
  const answer = await api("messages" + (wanted ? "?lang=" + encodeURIComponent(wanted) : ""));
  if (!answer.ok) return answer;
  messages = answer.data.messages || {};
  current = answer.data.lang || wanted || "en";
  if (lang) localStorage.setItem(STORED, current);
  setLanguage(current);
  document.documentElement.lang = current;
  for (const element of document.querySelectorAll("[data-word]")) {
    element.textContent = t(element.dataset.word);
  }
  document.title = t("web_page_title");
  return answer;
}
