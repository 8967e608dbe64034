// Runs list: select all, and "Overlay selected" opens the comparison page with the ticked runs.
const table = document.getElementById("run-table");
if (table) {
  const boxes = () => [...table.querySelectorAll("input[name=ids]")];
  const compare = document.getElementById("compare-selected");
  const update = () => {
    const ids = boxes().filter((b) => b.checked).map((b) => b.value);
    compare.href = ids.length ? `${compare.dataset.base}?runs=${ids.join(",")}` : compare.dataset.base;
  };
  document.getElementById("select-all").addEventListener("change", (event) => {
    boxes().forEach((box) => { box.checked = event.target.checked; });
    update();
  });
  table.addEventListener("change", update);
  document.getElementById("bulk-form").addEventListener("submit", (event) => {
    const button = event.submitter;
    if (button && button.value === "delete" && !boxes().some((b) => b.checked)) {
      event.preventDefault();
      alert("Tick the runs to delete first.");
    }
  });
}
