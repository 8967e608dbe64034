// Optuna's figures in the page's theme. Optuna draws them for a white page: a white plot behind
// its parallel coordinates (a white block on the dark theme) with grey axis values, and its trials
// coloured by Plotly's Blues, which starts at white, so that a trial vanished on the light theme
// (the slice's first point, the parallel coordinates' best line) and its darkest end on the dark
// one. Here the white plot goes (the theme's template has the card), the axis values take the
// template's muted colour, and Blues becomes the theme's marks scale (plotly_theme.js
// markColourscale: both ends show on the card), the colour bars by name and the lines Optuna
// already coloured by where their colour stood on Blues. search_detail.js draws them again when
// the theme changes.
import { markColourscale, themed } from "../workbench/plotly_theme.js";

// Plotly's sequential Blues (plotly.colors.sequential.Blues), Optuna's COLOR_SCALE.
const BLUES = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214], [66, 146, 198],
  [33, 113, 181], [8, 81, 156], [8, 48, 107]];

const rgb = (colour) => colour.match(/[\d.]+/g).slice(0, 3).map(Number); // "rgb(r, g, b)"

// Where `colour` stands on Blues, 0..1 (Optuna samples it between two neighbouring stops); null
// for a colour that is not Blues's.
function onBlues(colour) {
  const [red, green, blue] = rgb(colour);
  let best = null;
  for (let i = 0; i < BLUES.length - 1; i++) {
    const [a, b] = [BLUES[i], BLUES[i + 1]];
    // The share of the way from a to b, from the channel that changes most between them.
    const channel = [0, 1, 2].reduce((most, c) => (Math.abs(b[c] - a[c]) > Math.abs(b[most] - a[most]) ? c : most), 0);
    const share = Math.min(1, Math.max(0, ([red, green, blue][channel] - a[channel]) / (b[channel] - a[channel])));
    const miss = [0, 1, 2].reduce((sum, c) => sum + Math.abs(a[c] + share * (b[c] - a[c]) - [red, green, blue][c]), 0);
    if (!best || miss < best.miss) best = { miss, at: (i + share) / (BLUES.length - 1) };
  }
  return best && best.miss < 6 ? best.at : null;
}

// The colour at `at` (0..1) on a two-stop scale of "rgb(r, g, b)" colours.
function sample([[, low], [, high]], at) {
  const [a, b] = [rgb(low), rgb(high)];
  return `rgb(${[0, 1, 2].map((c) => Math.round(a[c] + at * (b[c] - a[c]))).join(", ")})`;
}

/** Optuna's `figure` ({data, layout}) as Plotly.react's data and layout, in the theme in effect. */
export function themedFigure(figure) {
  const scale = markColourscale();
  const data = figure.data.map((trace) => {
    const out = { ...trace };
    if (trace.marker?.colorscale) out.marker = { ...trace.marker, colorscale: scale };
    const at = /^rgb\(/.test(trace.line?.color) ? onBlues(trace.line.color) : null;
    if (at !== null) out.line = { ...trace.line, color: sample(scale, at) };
    return out;
  });
  const { plot_bgcolor: _white, ...layout } = figure.layout || {};
  // The parallel coordinates' axis values, in #555: 2:1 on the dark card. The template's muted.
  if (layout.annotations) {
    layout.annotations = layout.annotations.map(({ font, ...note }) => ({ ...note, font: { ...font, color: undefined } }));
  }
  // Plotly's own height, said: drawn again on a switch of theme, an autosized figure took its
  // card's height, none, and collapsed.
  return { data, layout: themed({ height: 450, ...layout, autosize: true }) };
}
