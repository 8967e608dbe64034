// Eight augmented copies of one training image of the chosen dataset, drawn by the server with
// the trainer's own augmentation code (as the new-dataset wizard shows its resize modes).
import { postForm } from "../workbench/http.js";

const PREVIEW_AUGMENT = ["dataset", "crop_size", "random_flip", "vertical_flip", "random_resized_crop", "rrc_scale",
  "rrc_ratio", "auto_augment", "color_jitter", "random_erasing"];

/** Wires the form's preview button; what a field refused is said beside it (`setFieldError`). */
export function augmentPreview({ form, $, setFieldError }) {
  async function previewAugmentations() {
    const data = new FormData();
    for (const name of PREVIEW_AUGMENT) {
      const element = form.elements[name];
      if (element.type !== "checkbox") data.append(name, element.value);
      else if (element.checked) data.append(name, "on");
    }
    $("augment-preview-status").textContent = "Augmenting…";
    let body;
    try {
      body = await postForm($("augment-preview-button").dataset.url, data);
    } catch (error) {
      const errors = error.body?.errors || {};
      for (const name of PREVIEW_AUGMENT) if (name !== "dataset") setFieldError(name, errors[name]);
      $("augment-preview-status").textContent = `No preview: ${Object.values(errors).join(" ") || error.message}`;
      return;
    }
    for (const name of PREVIEW_AUGMENT) if (name !== "dataset") setFieldError(name, undefined);
    $("augment-preview").replaceChildren(...body.images.map((url, index) => {
      const image = document.createElement("img");
      image.src = url;
      image.alt = `augmented copy ${index + 1}`;
      return image;
    }));
    $("augment-preview-status").textContent = `${body.images.length} copies at ${body.size[1]}×${body.size[0]}, as training makes them`;
  }
  $("augment-preview-button").addEventListener("click", previewAugmentations);
}
