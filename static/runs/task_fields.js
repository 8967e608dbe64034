// The new-run form on the chosen dataset's task (workbench/runs/web/forms_task.py). The best
// metric in the task's own names (the select carries trainer/protocol.py TASK_METRICS), not top-1
// meaning mAP. The classifier's fields (the presets, the recipe's augmentations, the crop, the mean
// image, the vertical flip: marked data-classification-only) only where the task takes them: the
// validator would refuse the recipe, another task's loader reads none of them, and their disabled
// fields are not sent. And the dataset's starting values (a batch the pre-flight takes on its
// training images, the task's best metric) in the fields that still hold the last dataset's.
export function taskFields({ form, fieldBox, $ }) {
  const metricSelect = form.elements.best_metric;
  const taskMetrics = JSON.parse(metricSelect.dataset.taskMetrics);
  let defaults = null; // the last dataset's; the server drew the first one's

  function showTask(task, recipe) {
    const metrics = taskMetrics[task] || taskMetrics.classification;
    for (const option of metricSelect.options) {
      option.hidden = !metrics.includes(option.value);
      option.disabled = option.hidden;
    }
    if (!metrics.includes(metricSelect.value)) metricSelect.value = metrics[0];
    for (const input of form.querySelectorAll("[data-classification-only]")) {
      input.disabled = !recipe;
      fieldBox(input.name).hidden = !recipe;
    }
    $("preset-source").hidden = !recipe;
    // The preview draws a classifier's augmentations (the server says why for another task).
    $("augment-preview-button").parentElement.hidden = !recipe;
    $("augment-preview").hidden = !recipe;
  }

  // A field the person changed keeps their value; one holding the last dataset's default takes this one's.
  function useDataset(dataset) {
    for (const [name, value] of Object.entries(dataset.defaults || {})) {
      const element = form.elements[name];
      if (element && defaults && element.value === defaults[name]) element.value = value;
    }
    defaults = dataset.defaults || null;
    showTask(dataset.task, dataset.recipe);
  }

  return { useDataset };
}
