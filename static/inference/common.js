// Small helpers shared by the inference pages (talking to the server: ../workbench/http.js).
// Percentages as every page writes them (two decimals): the bar and the table of one result agree.
export { formatPercent as percent } from "../workbench/format.js";

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
