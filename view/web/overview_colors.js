// overview_colors.js — the overview's colors: the scale the server computed
// (recording/overview_scale.h, sent with /api/overview as {log, lo, hi}) mapped to
// viridis, the colors of NaN/Inf, of no value and of values below a log scale, and the
// scale's labels. Pure: no page, no DOM (tested by Node's test runner, tests/web/).

const VIRIDIS = ['#440154', '#472d7b', '#3b528b', '#2c728e', '#21918c', '#28ae80', '#5ec962', '#addc30', '#fde725']
  .map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
export const NONFINITE = [255, 0, 255], NO_VALUE = [56, 59, 64], BELOW = [0, 0, 0];

// [r, g, b] at t in 0..1 (clamped) of the viridis ramp.
export function viridis(t) {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + (VIRIDIS[i + 1][k] - c) * f));
}
// Where `v` falls on `scale`: 0..1; < 0 below (0 and less on a log scale), > 1 above.
export function position(scale, v) {
  if (!scale.log) return (v - scale.lo) / (scale.hi - scale.lo);
  return v > 0 ? (Math.log10(v) - scale.lo) / (scale.hi - scale.lo) : -1;
}
// The color of a cell: NaN/Inf, no value (null, or no scale), below the scale, or viridis.
export function cellColor(scale, value, nonfinite) {
  if (nonfinite) return NONFINITE;
  if (value === null || !scale) return NO_VALUE;
  const p = position(scale, value);
  return p < 0 ? BELOW : viridis(p);
}
// The label of the scale's end `e`: a decade on a log scale (1e-5, 0.01, 1000, 1e4), else the value.
export function scaleLabel(scale, e) { return scale.log ? (e >= -2 && e <= 3 ? String(10 ** e) : `1e${e}`) : String(e); }
