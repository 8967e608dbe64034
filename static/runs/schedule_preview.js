// The new-run form's solver: the fields the learning-rate policy and the optimizer take, and the
// live preview of the learning rate over the whole run (the server's own schedule code, one line
// per sweep combination), charted in the page's theme (plotly_theme.js restyles it on a switch).
import { postForm } from "../workbench/http.js";
import { themed } from "../workbench/plotly_theme.js";

const POLICY_FIELDS = {
  fixed: [], step: ["gamma", "step_size"], multistep: ["gamma", "step_values"], exp: ["gamma"],
  inv: ["gamma", "power"], poly: ["power"], sigmoid: ["gamma", "step_size"], cosine: ["min_lr"],
  onecycle: ["onecycle_pct_start", "onecycle_div_factor", "onecycle_final_div_factor"],
};
const ALL_POLICY_FIELDS = [...new Set(Object.values(POLICY_FIELDS).flat())];
const PREVIEW_FIELDS = ["dataset", "epochs", "batch_size", "optimizer", "base_lr", "lr_policy", "momentum", "weight_decay",
  "warmup_percent", ...ALL_POLICY_FIELDS];

/** Wires the solver's fields of `form`; returns `refresh`, which asks the server for the preview
 * again (debounced by the page's `debounce`, as every other live preview of the form). */
export function schedulePreview({ form, fieldBox, $, setFieldError, debounce, url }) {
  function showSolverFields() {
    const wanted = POLICY_FIELDS[form.elements.lr_policy.value] || [];
    for (const name of ALL_POLICY_FIELDS) fieldBox(name).hidden = !wanted.includes(name);
    const optimizer = form.elements.optimizer.value;
    fieldBox("momentum").hidden = !["sgd", "nesterov", "rmsprop"].includes(optimizer);
  }

  const refresh = debounce(async () => {
    const data = new FormData();
    for (const name of PREVIEW_FIELDS) data.append(name, form.elements[name].value);
    let body = null;
    let failed = null;
    try { body = await postForm(url, data); } catch (error) { failed = error; }
    const errors = failed?.body?.errors || {};
    for (const name of PREVIEW_FIELDS) if (name !== "dataset") setFieldError(name, errors[name]);
    $("lr-error").textContent = failed ? failed.message : "";
    if (failed) return;
    // From zero: a fixed rate's flat line stood at the middle of Plotly's -1..1, read as a rate of 0.
    const top = Math.max(...body.traces.flatMap((t) => t.lr)) || 1;
    window.Plotly.react("lr-chart", body.traces.map((t) => ({
      type: "scatter", mode: "lines", name: t.name, x: t.epochs, y: t.lr,
      customdata: t.steps, hovertemplate: "epoch %{x}<br>step %{customdata}<br>lr %{y:.4g}<extra>%{fullData.name}</extra>",
    })), themed({
      margin: { l: 70, r: 10, t: 10, b: 45 }, xaxis: { title: { text: "epoch" } }, yaxis: { title: { text: "learning rate" }, exponentformat: "e", range: [0, top * 1.05] },
      showlegend: body.traces.length > 1, legend: { orientation: "h" },
    }), { displayModeBar: false, responsive: true });
    const first = body.traces[0];
    $("lr-summary").textContent = `${first.total_steps} optimizer steps, ${first.steps_per_epoch} per epoch`;
    const runs = body.traces.length;
    $("sweep-note").textContent = runs > 1 ? `This creates a sweep of ${runs} runs, one per combination, grouped in the runs list.` : "";
    $("create-run").textContent = runs > 1 ? `Create ${runs} runs` : "Create run";
  }, 250);

  form.elements.lr_policy.addEventListener("change", showSolverFields);
  form.elements.optimizer.addEventListener("change", showSolverFields);
  for (const name of PREVIEW_FIELDS) {
    const element = form.elements[name];
    element.addEventListener("input", refresh);
    element.addEventListener("change", refresh);
  }
  showSolverFields();
  return { refresh };
}
