// The new-run page's "Find the largest batch": queues a one-cell benchmark with the batch-size
// finder for the chosen network, image size, precision and GPUs (it waits for those GPUs like
// any benchmark), follows it, and offers the run's global batch for the batch-size field ("Use 412").
import { getJSON, sendJSON } from "../workbench/http.js";

const FINAL = ["done", "failed", "cancelled"];
const POLL_MS = 1000;

function gpuCount(form) {
  const mode = form.querySelector("input[name=device_mode]:checked")?.value || "auto";
  if (mode === "cpu") return null;
  if (mode === "count") return Number(form.elements.gpu_count.value || 1);
  if (mode === "specific") return form.querySelectorAll("input[name=gpus]:checked").length || 1;
  return 1;
}

function answerText(answer, trainImages) {
  if (answer.state !== "done") return `Not found: ${answer.reason}`;
  if (!answer.batch_size) return `Not found: ${answer.message || "not even a batch of 1 fits"}`;
  const split = answer.processes > 1 ? ` (${answer.per_gpu_batch} per process × ${answer.processes})` : "";
  const capped = answer.per_gpu_batch === answer.limit && trainImages
    ? `; the finder stopped at the ${trainImages} training images` : "";
  return `Largest batch that fits: ${answer.batch_size}${split} on ${answer.devices.join(", ")}${capped}.`;
}

export function largestBatchFinder({ form, button, status, network, dataset }) {
  const url = button.dataset.url;
  let following = null;

  async function follow(id) {
    const answer = await getJSON(`${url.replace(/largest-batch\/$/, "")}${id}/largest-batch/`);
    if (!FINAL.includes(answer.state)) {
      status.textContent = answer.state === "running"
        ? `Measuring on ${answer.devices.join(", ")}…`
        : `Queued: ${answer.wait_reason || answer.reason}`;
      following = setTimeout(() => follow(id).catch(fail), POLL_MS);
      return;
    }
    following = null;
    button.disabled = false;
    status.textContent = answerText(answer, dataset()?.train);
    status.dataset.state = answer.batch_size ? "found" : "failed";
    if (answer.batch_size) offerValue(answer.batch_size);
  }

  // The answer is offered, not written over what the user typed: they may want a smaller batch.
  function offerValue(batchSize) {
    const use = document.createElement("button");
    use.type = "button";
    use.className = "secondary";
    use.id = "use-batch";
    use.textContent = `Use ${batchSize}`;
    use.title = "Put this batch size in the batch-size field";
    use.addEventListener("click", () => {
      form.elements.batch_size.value = String(batchSize);
      form.elements.batch_size.dispatchEvent(new Event("input", { bubbles: true }));
      use.remove();
    });
    status.append(" ", use);
  }

  function fail(error) {
    following = null;
    button.disabled = false;
    status.dataset.state = "failed";
    status.textContent = error.message;
  }

  button.addEventListener("click", async () => {
    if (following) return;
    const gpus = gpuCount(form);
    if (gpus === null) {
      fail(new Error("The CPU has no memory limit to find a batch against; choose GPUs."));
      return;
    }
    button.disabled = true;
    status.dataset.state = "queued";
    status.textContent = "Queuing…";
    try {
      const answer = await sendJSON(url, {
        body: {
          dataset: form.elements.dataset.value,
          network: network(),
          crop_size: form.elements.crop_size.value,
          precision: form.elements.precision.value,
          gpus,
          model_parallel: form.elements.model_parallel.value || 1,
        },
      });
      await follow(answer.id);
    } catch (error) {
      fail(error);
    }
  });
}
