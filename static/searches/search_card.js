// The new-run page's search card (templates/searches/_search_card.html) on the chosen dataset's
// task: its objective offers the task's own metrics only (the select carries trainer/protocol.py
// TASK_METRICS), as the run's best metric does; "the task's own" (empty) stays. Imported by the
// page's module, which knows the dataset: searchCard(form).useTask(task).
export function searchCard(form) {
  const select = form.elements["search-objective"];
  const taskMetrics = select ? JSON.parse(select.dataset.taskMetrics) : {};

  function useTask(task) {
    if (!select) return;
    const metrics = taskMetrics[task] || taskMetrics.classification || [];
    for (const option of select.options) {
      option.hidden = option.value !== "" && !metrics.includes(option.value);
      option.disabled = option.hidden;
    }
    if (select.selectedOptions[0]?.hidden) select.value = "";
  }

  return { useTask };
}
