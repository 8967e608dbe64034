// User text on its way to Plotly. Plotly draws a subset of HTML in every string it renders (axis
// ticks, legends, hover labels): a class folder named <a href='https://evil.example/'>link</a> was
// a live link on the confusion matrix, and <span style="font-size:300px"> drew over it. Plotly
// decodes &lt; &gt; &amp; and numeric entities back (not &quot;: hence &#34;), so the escaped
// label reads exactly as it was typed.
const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };

export function plotlyText(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

export function plotlyTexts(values) {
  return Array.from(values || [], plotlyText);
}
