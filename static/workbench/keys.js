// The workbench's keyboard shortcuts, on every page, and the "?" overlay that lists them (the
// <dialog id="shortcuts"> in base.html). A key typed into a field, or with Ctrl, Alt or Meta,
// is the field's or the browser's: shortcuts only act on the page itself.
import { toggleTheme } from "./theme.js";

const dialog = document.getElementById("shortcuts");
let pendingGo = false; // "g" was typed: the next key names a page

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

function goTo(key) {
  const link = document.querySelector(`#shortcuts [data-go="${key}"]`);
  if (link) window.location.assign(link.href);
}

function onKey(event) {
  if (event.ctrlKey || event.altKey || event.metaKey || typing(event.target)) return;
  if (pendingGo) {
    pendingGo = false;
    goTo(event.key);
    return;
  }
  if (event.key === "?") {
    if (dialog.open) dialog.close();
    else dialog.showModal();
  } else if (event.key === "t") {
    toggleTheme();
  } else if (event.key === "/") {
    // The page's own search or filter field, where it has one.
    const field = document.querySelector("main input[type=search], main .filters input, main .filters select");
    if (field) {
      event.preventDefault();
      field.focus();
    }
  } else if (event.key === "g" && !dialog.open) {
    pendingGo = true;
  }
}

if (dialog) {
  document.addEventListener("keydown", onKey);
  document.getElementById("shortcuts-open")?.addEventListener("click", () => dialog.showModal());
  dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
}
