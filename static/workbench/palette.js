// The one palette of runs, classes and series: Okabe and Ito's eight colours, told apart with
// every common colour-vision deficiency. Black, the eighth, is the page's text colour instead
// (it vanished on the dark theme). States use the same hues in base.css (--ok, --bad, --warn)
// and always say their word too: a colour never carries a meaning alone.
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#999999"];

/** The colour of the `index`th run, class or series, cycling through the palette. */
export function paletteColour(index) {
  return PALETTE[((index % PALETTE.length) + PALETTE.length) % PALETTE.length];
}
