// The one way the pages write numbers for people; workbench/runs/templatetags/numbers.py is its
// twin on the server, rule for rule, so a page drawn by the server and updated here reads the same.
//   percentages: a fraction as 97.75% (two decimals, everywhere: header, menus, bars, tables)
//   losses:      four decimals (0.1234); below 0.001, three significant digits (1.23e-4)
//   sizes:       binary units, as the GPUs report memory: B, KiB, MiB, GiB, TiB (one decimal)
//   durations:   12 s, 3 min 5 s, 1 h 2 min
//   dates:       2026-12-02 14:03:09 in the reader's time zone
//   whole:       12,345; counts: 11.2 M, 61.5 k (parameters)
//   rates:       images/s, whole from 100 (12,345), three significant digits below (12.3, 0.3)
//   settings:    a search's values, four significant digits (0.0001235, 1.235e-7); whole ones whole
const DASH = "–";
const isNumber = (value) => typeof value === "number" && Number.isFinite(value);

export function formatPercent(fraction) {
  return isNumber(fraction) ? `${(100 * fraction).toFixed(2)}%` : DASH;
}

export function formatLoss(value) {
  if (!isNumber(value)) return DASH;
  if (value === 0 || Math.abs(value) >= 0.001) return value.toFixed(4);
  return value.toExponential(2);
}

// The metrics' names in the pages' words, as the trainer's messages name them.
export const METRIC_NAMES = {
  top1: "top-1", top5: "top-5", pixel_accuracy: "pixel accuracy", map: "mAP", map_50: "mAP50", map_75: "mAP75",
  mar_100: "mAR@100", miou: "mIoU", dice: "Dice", val_loss: "val. loss", loss: "loss",
};
export const metricName = (name) => METRIC_NAMES[name] || name;

// Accuracies, mAP, IoU and Dice go up as a model learns (trainer/protocol.py METRIC_DIRECTION);
// losses go down.
export const higherIsBetter = (name) => !name.endsWith("loss");

// Metrics that go up are fractions, shown as percentages, as are a few shares; the others are losses.
const FRACTIONS = new Set(["top1", "top5", "pixel_accuracy", "map", "map_50", "map_75", "mar_100", "miou", "dice",
  "accuracy", "data_wait_share", "same_top1"]);
export const isFraction = (name) => FRACTIONS.has(name);
export function formatMetric(name, value) {
  return isFraction(name) ? formatPercent(value) : formatLoss(value);
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
export function formatBytes(bytes) {
  if (!isNumber(bytes)) return DASH;
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit ? `${value.toFixed(1)} ${UNITS[unit]}` : `${Math.round(value)} B`;
}

export function formatDuration(seconds) {
  if (!isNumber(seconds)) return DASH;
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// Whole numbers (images/s) with thousands separators, 12,345, without Intl (see formatDate).
export function formatWhole(value) {
  if (!isNumber(value)) return DASH;
  const rounded = Math.round(value);
  return String(rounded).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// Rates (images/s): whole from 100; below, three significant digits (a CPU run's 0.3 read "0").
export function formatRate(value) {
  if (!isNumber(value)) return DASH;
  if (Math.abs(value) >= 100 || value === 0) return formatWhole(value);
  return String(Number(value.toPrecision(3)));
}

// Large counts (parameters) short: 11.2 M, 1.23 M, 61.5 k.
export function formatCount(value) {
  if (!isNumber(value)) return DASH;
  const size = Math.abs(value);
  if (size >= 1e6) return `${(value / 1e6).toFixed(size >= 1e7 ? 1 : 2)} M`;
  if (size >= 1e3) return `${(value / 1e3).toFixed(1)} k`;
  return String(Math.round(value));
}

// A setting's value as a search chose it (lr=0.0001235, batch_size=64, optimizer=sgd): a sampler's
// float has 17 digits nobody reads. Booleans and words as they are.
export function formatSetting(value) {
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return DASH;
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
}

// Without Intl: the first toLocaleString() of a page loads the locale data (~40 ms).
const pad = (n) => String(n).padStart(2, "0");
export function formatDate(value) {
  const date = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(date.getTime())) return DASH;
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} `
    + `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

// HH:MM:SS of a Unix time, for log lines.
export function formatClock(seconds) {
  return formatDate(new Date(seconds * 1000)).slice(11);
}

// Plotly axes of fractions: whole percents on the ticks, the percentage above on hover.
export const PERCENT_AXIS = { tickformat: ".0%", hoverformat: ".2%" };
