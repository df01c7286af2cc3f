// The HTTP API of `turnback serve`: same-origin requests carrying the session cookie the token URL set.

let language = "";

/** The language the server words its answers in (the page's switch). */
export function setLanguage(lang) {
  language = lang;
}

function withLanguage(path) {
  if (!language || /[?&]lang=/.test(path)) return path;
  return path + (path.includes("?") ? "&" : "?") + "lang=" + encodeURIComponent(language);
}

/** GET or POST (when `body` is given) `/api/v1/PATH`; resolves to `{status, ok, data}`, never throws on HTTP errors. */
export async function api(path, body) {
  const init = { credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(withLanguage("/api/v1/" + path), init);
  } catch (error) {
    return { status: 0, ok: false, data: { message: String(error) } };
  }
  let data = {};
  try {
    data = await response.json();
  } catch {
    data = {};
  }
  return { status: response.status, ok: response.ok, data };
}

/** Server-Sent Events from the store: calls `onChange(event)`, `onOpen()`, `onLost()`. EventSource reconnects. */
export function listen({ onChange, onOpen, onLost }) {
  const source = new EventSource("/api/v1/events", { withCredentials: true });
  source.onopen = () => onOpen();
  source.onerror = () => onLost();
  source.onmessage = (message) => {
    let event = {};
    try {
      event = JSON.parse(message.data);
    } catch {
      event = {};
    }
    onChange(event);
  };
  for (const name of ["change", "session", "turn", "call", "operation", "busy"]) {
    source.addEventListener(name, (message) => source.onmessage(message));
  }
  return source;
}
