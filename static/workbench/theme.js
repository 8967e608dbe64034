// Light or dark: the system's preference, live, until the header's switch pins one. The pinned
// theme is stored in localStorage and set on <html data-theme> by base.html's inline script in
// <head>, before the stylesheet paints (no flash of the other theme); base.css holds both
// themes' colours (light-dark()), so this module only moves the attribute and tells the charts.

const KEY = "workbench-theme";
const system = window.matchMedia("(prefers-color-scheme: dark)");

/** The theme in effect now: "light" or "dark". */
export function currentTheme() {
  const pinned = document.documentElement.dataset.theme;
  if (pinned === "light" || pinned === "dark") return pinned;
  return system.matches ? "dark" : "light";
}

/** Calls `callback(theme)` whenever the theme in effect changes, by the switch or the system. */
export function onThemeChange(callback) {
  document.addEventListener("workbench:theme", (event) => callback(event.detail.theme));
}

function announce() {
  const theme = currentTheme();
  const button = document.getElementById("theme-switch");
  if (button) {
    // A toggle keeps its name; its state is aria-pressed, and in words for the eye ("Dark theme: on").
    button.setAttribute("aria-pressed", String(theme === "dark"));
    button.querySelector(".theme-state").textContent = theme === "dark" ? ": on" : ": off";
  }
  document.dispatchEvent(new CustomEvent("workbench:theme", { detail: { theme } }));
}

/** Pins the other theme than the one in effect, and remembers it. */
export function toggleTheme() {
  const theme = currentTheme() === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = theme;
  try {
    localStorage.setItem(KEY, theme);
  } catch {
    // Storage refused (a private window's quota): the switch still works for this page.
  }
  announce();
}

system.addEventListener("change", announce);
document.getElementById("theme-switch")?.addEventListener("click", toggleTheme);
announce();
