// Small helpers shared by the inference pages.
export function csrfToken() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

export async function postForm(url, formData) {
  const response = await fetch(url, {
    method: "POST", body: formData, credentials: "same-origin",
    headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
  });
  let body = {};
  try { body = await response.json(); } catch { body = { detail: `HTTP ${response.status}` }; }
  if (!response.ok) throw new Error(errorText(body));
  return body;
}

export function errorText(body) {
  if (typeof body !== "object" || body === null) return String(body);
  return Object.entries(body).map(([field, value]) => {
    const text = Array.isArray(value) ? value.join(" ") : String(value);
    return field === "detail" ? text : `${field}: ${text}`;
  }).join("; ");
}

export function percent(value, digits = 1) {
  return value === null || value === undefined ? "–" : `${(100 * value).toFixed(digits)}%`;
}

// Click a header to sort by its data-key; `rows` are objects, `render(rows)` redraws the body.
export function sortable(table, getRows, render) {
  let key = null, ascending = true;
  table.querySelectorAll("th[data-key]").forEach((th) => {
    th.addEventListener("click", () => {
      ascending = key === th.dataset.key ? !ascending : th.dataset.type !== "number";
      key = th.dataset.key;
      table.querySelectorAll("th").forEach((other) => other.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const numeric = th.dataset.type === "number";
      const rows = [...getRows()].sort((a, b) => {
        const x = a[key], y = b[key];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        const order = numeric ? x - y : String(x).localeCompare(String(y));
        return ascending ? order : -order;
      });
      render(rows);
    });
  });
}
