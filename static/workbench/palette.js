// The one palette of runs, classes and series: Okabe and Ito's eight colours, told apart with
// every common colour-vision deficiency. Black, the eighth, is the page's text colour instead
// (it vanished on the dark theme). States use the same hues in base.css (--ok, --bad, --warn)
// and always say their word too: a colour never carries a meaning alone.
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#999999"];

/** The colour of the `index`th run, class or series, cycling through the palette. */
export function paletteColour(index) {
  return PALETTE[((index % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

// WCAG's relative luminance of a "#rrggbb" colour.
function luminance(colour) {
  const [red, green, blue] = [1, 3, 5].map((i) => {
    const channel = parseInt(colour.slice(i, i + 2), 16) / 255;
    return channel <= 0.04045 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * red + 0.7152 * green + 0.0722 * blue;
}

/** Black or white, whichever has the more contrast on `colour` ("#rrggbb"): the text of a label
 * drawn on its class's colour (every colour of the palette keeps 4.5:1 with its ink). */
export function inkOn(colour) {
  const light = luminance(colour);
  return (1.05 / (light + 0.05)) > ((light + 0.05) / 0.05) ? "#ffffff" : "#000000";
}
