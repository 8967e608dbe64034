// The notice under the run's header kept current while it trains: what the evaluator said of the
// latest validation (the warnings logged after the last training metrics, just before the
// validation event; workbench/runs/web/learning.py is the rule, which drew the notice the page
// opened with). Fed the live events only: a replay's metrics come as series, not as events.
export function validationNotes(header) {
  let pending = [];
  function show(notes) {
    let box = document.getElementById("run-validation-notes");
    if (!box && !notes.length) return;
    if (!box) {
      box = document.createElement("p");
      box.id = "run-validation-notes";
      box.className = "notice";
      box.setAttribute("role", "status");
      header.after(box);
    }
    box.hidden = !notes.length;
    box.textContent = `At its last validation: ${notes.join(" ")}.`;
  }
  return (event) => {
    if (event.type === "metrics") pending = [];
    else if (event.type === "log" && event.level === "warning" && event.line) pending.push(event.line);
    else if (event.type === "validation") {
      show([...new Set(pending)]);
      pending = [];
    }
  };
}
