// format.js — how the page writes numbers and times (pure: no page, no DOM; tested by
// Node's test runner, tests/web/).

// "850 ms", "12.5 s", "3 min": how long ago a frame came.
export function formatAge(ms) {
  if (ms === undefined) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}
// A summary's value in a few characters: 4 significant digits, exponents past 1e5 and
// below 1e-3; null is "no value".
export function formatValue(v) {
  if (v === null) return 'no value';
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}
// `s` matched literally in a regular expression (a stream name in the filter).
export function escapeRegExp(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); }
// A list of ranks (ascending) in a few characters: runs as "0–3", "ranks 0–3, 8, 12–15";
// past `most` pieces, the first ones and "… (n ranks)".
export function formatRanks(ranks, most = 6) {
  const runs = [];
  for (const r of ranks) {
    const last = runs[runs.length - 1];
    if (last && r === last[1] + 1) last[1] = r; else runs.push([r, r]);
  }
  const text = runs.slice(0, most).map(([a, b]) => (a === b ? String(a) : `${a}–${b}`));
  if (runs.length > most) text.push(`… (${ranks.length} ranks)`);
  return `rank${ranks.length === 1 ? '' : 's'} ${text.join(', ')}`;
}
