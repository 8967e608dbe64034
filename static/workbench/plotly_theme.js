// Every chart's colours from one template: the page's theme (base.css's custom properties) and
// the one palette (palette.js). A page passes its layout through themed(); when the theme
// changes (the header's switch, or the system's preference, live) every chart on the page is
// restyled here, so no page listens for it.
import { PALETTE } from "./palette.js";
import { onThemeChange } from "./theme.js";

// A custom property holds light-dark(a, b), not a colour: a probe element resolves it.
function resolved(property) {
  const probe = document.createElement("span");
  probe.style.color = `var(${property})`;
  probe.hidden = true;
  document.body.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour;
}

/** Plotly's template for the theme in effect. */
export function plotlyTemplate() {
  const fg = resolved("--fg");
  const grid = resolved("--line");
  const axis = { gridcolor: grid, linecolor: grid, zerolinecolor: grid, tickcolor: grid };
  return {
    layout: {
      paper_bgcolor: resolved("--card"),
      plot_bgcolor: resolved("--card"),
      font: { color: fg },
      colorway: PALETTE,
      xaxis: axis,
      yaxis: axis,
      legend: { bgcolor: "rgba(0,0,0,0)" },
      hoverlabel: { bgcolor: resolved("--bg"), font: { color: fg }, bordercolor: grid },
      annotationdefaults: { font: { color: resolved("--muted") } },
      // Taken by a heatmap with autocolorscale: its empty cells are the card, not a white block on
      // the dark theme, and its colours follow a switch of theme.
      colorscale: { sequential: [[0, resolved("--card")], [0.5, resolved("--heat-mid")], [1, resolved("--heat-high")]] },
    },
  };
}

/** A scale for marks coloured by a value (points, lines) whose both ends show on the card (3:1 or
 * more), unlike the heatmaps' (which starts at the card): from Okabe-Ito's blue, away from the card. */
export function markColourscale() {
  return [[0, resolved("--mark-low")], [1, resolved("--mark-high")]];
}

/** `layout` with the theme's template (the page's own settings win over the template's). */
export function themed(layout = {}) {
  return { ...layout, template: plotlyTemplate() };
}

onThemeChange(() => {
  if (!window.Plotly) return;
  const template = plotlyTemplate();
  for (const chart of document.querySelectorAll(".js-plotly-plot")) window.Plotly.relayout(chart, { template });
});
