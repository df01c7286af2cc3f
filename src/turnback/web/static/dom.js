// Building elements from nodes, never from HTML strings: a text a server or a file gave is set as text.

/** `element("button", {class: "x", "aria-label": "…"}, child, "text", …)`; `on*` attributes become listeners. */
export function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A modal <dialog>: resolves to the value of the button pressed, or null on Cancel / Escape. */
export function ask({ title, body, buttons, cancel }) {
  return new Promise((resolve) => {
    const heading = element("h2", { class: "dialog-title" }, title);
    const dialog = element("dialog", { class: "confirm" }, heading, element("div", { class: "dialog-body" }, body));
    const heads = element("div", { class: "dialog-buttons" });
    const id = "dialog-title-" + Math.random().toString(36).slice(2);
    heading.id = id;
    dialog.setAttribute("aria-labelledby", id);
    let settled = false;
    const finish = (value) => {
      if (settled) return;
      settled = true;
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    for (const button of buttons) {
      const node = element(
        "button",
        {
          type: "button",
          class: button.primary ? "primary" : "",
          disabled: button.disabled,
          title: button.why,
          onclick: () => finish(button.value),
        },
        button.label,
      );
      heads.append(node);
    }
    heads.append(element("button", { type: "button", class: "cancel", onclick: () => finish(null) }, cancel));
    dialog.append(heads);
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(null);
    });
    document.body.append(dialog);
    dialog.showModal();
    const first = heads.querySelector("button.primary:not([disabled])") || heads.querySelector("button.cancel");
    first.focus();
  });
}
