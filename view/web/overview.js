// overview.js — the overview page: a heatmap per rank of one metric, a row per tracked
// tensor, a column per step (or block of steps), on the one color scale the server sends
// (overview_colors.js), and first, for a sharded run, the whole tensors merged from the
// ranks' parts; hover names the cell, click opens its tile at that step; the
// banner names the first anomaly of each type. Above them, with several ranks, the ranks
// at one step (overview_ranks.js); with more than MANY_RANKS, only the chosen ranks'
// heatmaps are asked for and shown (a click on a rank's row chooses it).
import { $, state, writeHash } from './state.js';
import { formatRanks, formatValue } from './format.js';
import { BELOW, NONFINITE, NO_VALUE, scaleLabel } from './overview_colors.js';
import { paintCells } from './overview_cells.js';
import { layout, openTile } from './tiles.js';
import { ranksStep, renderRanks } from './overview_ranks.js';

const MANY_RANKS = 16;  // beyond, the heatmaps of the chosen ranks only
const CHOSEN_MAX = 4;

const AXIS_H = 30;
let ROW_H = 14;  // a row's height: up to 28 pixels when few rows leave room
function drawOverviewTable(canvas, t, scale) {
  const rows = t.rows.length, cols = t.first_steps.length;
  const ctx = canvas.getContext('2d');
  ctx.font = '11px ui-monospace, monospace';
  const labelW = Math.min(canvas.width * 0.4, Math.max(60, ...t.rows.map((r) => ctx.measureText(r).width)) + 8);
  const plot = { x: Math.ceil(labelW), y: 2, w: Math.max(1, canvas.width - Math.ceil(labelW) - 4), h: rows * ROW_H };
  canvas.height = plot.h + AXIS_H + 4;
  ctx.font = '11px ui-monospace, monospace';  // (a resize resets the context)
  ctx.fillStyle = '#1f2226';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  paintCells(ctx, plot, t.values, t.nonfinite, scale);
  ctx.fillStyle = '#e6e8eb';
  ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
  for (let r = 0; r < rows; r++) ctx.fillText(t.rows[r], plot.x - 4, plot.y + (r + 0.5) * ROW_H, labelW - 6);
  ctx.fillStyle = '#8b9199';
  ctx.textAlign = 'center'; ctx.textBaseline = 'top';
  const ticks = Math.max(1, Math.min(cols, Math.floor(plot.w / 80)));
  for (let i = 0; i < ticks; i++) {
    const c = ticks === 1 ? 0 : Math.round(i * (cols - 1) / (ticks - 1));
    const x = plot.x + (c + 0.5) * plot.w / cols;
    ctx.fillText(String(t.first_steps[c]), Math.min(canvas.width - 20, Math.max(plot.x + 10, x)), plot.y + plot.h + 4);
  }
  ctx.fillText('step', plot.x + plot.w / 2, plot.y + plot.h + 17);
  canvas.overview = { t, plot, rows, cols };
}
// The cell under client point (x, y) of a table's canvas, or null.
function cellAt(canvas, x, y) {
  const o = canvas.overview;
  if (!o) return null;
  const b = canvas.getBoundingClientRect();
  const px = (x - b.left) * canvas.width / b.width, py = (y - b.top) * canvas.height / b.height;
  const c = Math.floor((px - o.plot.x) * o.cols / o.plot.w), r = Math.floor((py - o.plot.y) / ROW_H);
  if (c < 0 || c >= o.cols || r < 0 || r >= o.rows) return null;
  return { r, c, stream: o.t.rows[r], rank: o.t.rank, whole: o.t.whole ? o.t.ranks : null,
           first: o.t.first_steps[c], last: o.t.last_steps[c], value: o.t.values[r][c], nonfinite: !!o.t.nonfinite[r][c] };
}
function cellText(cell) {
  const steps = cell.first === cell.last ? `step ${cell.first}` : `steps ${cell.first}–${cell.last} (max)`;
  const where = cell.whole ? `the whole tensor, from the parts of ${formatRanks(cell.whole)}` : `rank ${cell.rank}`;
  return `${cell.stream}\n${where} · ${steps}\n${metricInfo().title}: ${formatValue(cell.value)}` +
    (cell.nonfinite ? ' (of its finite values)\nNaN/Inf in this tensor' : '');
}
function metricInfo() {
  const ms = (state.overview && state.overview.metrics) || [];
  return ms.find((m) => m.name === state.metric) || ms[0] || { name: '', title: '', log: true };
}
// For tests: the client point of the cell of (rank, stream) at `step` (rank 'whole': of
// the whole tensors' heatmap).
state.cellCenter = (rank, stream, step) => {
  for (const canvas of document.querySelectorAll('#overview-ranks canvas')) {
    const o = canvas.overview;
    if (!o || (rank === 'whole' ? !o.t.whole : o.t.whole || o.t.rank !== rank)) continue;
    const r = o.t.rows.indexOf(stream);
    const c = o.t.first_steps.findIndex((f, i) => f <= step && step <= o.t.last_steps[i]);
    if (r < 0 || c < 0) return null;
    const b = canvas.getBoundingClientRect();
    return { x: b.left + (o.plot.x + (c + 0.5) * o.plot.w / o.cols) * b.width / canvas.width,
             y: b.top + (o.plot.y + (r + 0.5) * ROW_H) * b.height / canvas.height };
  }
  return null;
};
export function renderOverview() {
  const data = state.overview;
  if (!data) return;
  const metrics = $('overview-metrics');
  if (metrics.childElementCount !== data.metrics.length) {
    metrics.replaceChildren(...data.metrics.map((m) => {
      const b = document.createElement('button');
      b.textContent = m.title; b.dataset.metric = m.name;
      b.onclick = () => { state.metric = m.name; writeHash(); loadOverview(); };
      return b;
    }));
  }
  const info = metricInfo();
  for (const b of metrics.children) b.classList.toggle('on', b.dataset.metric === info.name);
  // The whole tensors of sharded runs first (a heatmap per job, merged from its ranks'
  // parts: whole_tables.h), then each rank's.
  const wholes = (data.whole || []).map((t) => ({ ...t, whole: true, rank: t.ranks[0], key: `whole|${t.job}` }));
  const tables = [...wholes, ...data.sources.flatMap((s) => s.tables.map((t) =>
    ({ ...t, source: s.source, name: s.name, key: `${s.source}|${t.rank}|${t.pid}` })))];
  const multi = data.sources.length > 1;
  const scale = data.scale;  // one scale for every rank and session (the server's: recording/overview_scale.h)
  const sc = $('overview-scale');
  sc.replaceChildren();
  if (scale) {
    const span = (cls, text, color) => {
      const e = document.createElement('span');
      if (cls) e.className = cls;
      if (text) e.textContent = text;
      if (color) e.style.background = `rgb(${color})`;
      return e;
    };
    sc.append(span('', scaleLabel(scale, scale.lo)), span('ramp'), span('', scaleLabel(scale, scale.hi) + (scale.log ? ' (log)' : '')),
      span('swatch', '', NONFINITE), span('', 'NaN/Inf'), span('swatch', '', NO_VALUE), span('', 'no value'));
    if (scale.log) sc.append(span('swatch', '', BELOW), span('', '0 / below'));
  }
  const incomplete = data.sources.some((s) => !s.complete);
  $('overview-note').textContent = tables.length ? (incomplete ? 'reading the summary tables…' : '') +
    (data.whole_left_out ? ` ${data.whole_left_out} sharded rows of further jobs not merged (the first jobs only)` : '')
    : 'No summaries yet: track a model (stats_every, on by default) to see every tensor here.';
  if (state.ranks) {
    // (on the legend's scale: the one the heatmaps below are drawn on)
    renderRanks(state.ranks, data.scale || state.ranks.scale, () => metricInfo().title, chooseRank, () => loadOverview());
  }
  const box = $('overview-ranks');
  const width = Math.max(320, Math.floor((box.clientWidth - 12 * (tables.length - 1)) / Math.max(1, tables.length)));
  const most = Math.max(1, ...tables.map((t) => t.rows.length));
  ROW_H = Math.min(28, Math.max(12, Math.floor((innerHeight - box.getBoundingClientRect().top - AXIS_H - 40) / most)));
  const keep = new Map([...box.children].map((e) => [e.dataset.key, e]));
  const els = tables.map((t) => {
    const key = t.key;
    let el = keep.get(key);
    if (!el) {
      el = document.createElement('div');
      el.className = 'overview-rank'; el.dataset.key = key;
      const h = document.createElement('h3');
      const canvas = document.createElement('canvas');
      canvas.addEventListener('mousemove', (e) => {
        const cell = cellAt(canvas, e.clientX, e.clientY);
        const tip = $('overview-tip');
        tip.hidden = !cell;
        if (!cell) return;
        tip.textContent = cellText(cell);
        tip.style.left = `${Math.min(innerWidth - 260, e.clientX + 14)}px`;
        tip.style.top = `${e.clientY + 14}px`;
      });
      canvas.addEventListener('mouseleave', () => { $('overview-tip').hidden = true; });
      canvas.addEventListener('click', (e) => {
        const cell = cellAt(canvas, e.clientX, e.clientY);
        if (cell) openTile(cell.rank, cell.stream, cell.first);
      });
      el.append(h, canvas);
    }
    const h3 = el.querySelector('h3');
    const columns = t.steps_per_column > 1 ? ` · a column = ${t.steps_per_column} steps` : '';
    if (t.whole) {
      const left = t.left_out;
      const notes = [left.conflicting ? `${left.conflicting} steps whose parts disagree (two runs read as one?)` : '',
        left.partial ? `${left.partial} steps of Partial sums` : ''].filter(Boolean);
      h3.textContent = `whole tensors · merged from the parts of ${formatRanks(t.ranks)} · ${t.rows.length} ` +
        `tensor${t.rows.length === 1 ? '' : 's'}` +
        columns + (notes.length ? ` · left out: ${notes.join(', ')}` : '');
      h3.title = `steps left out: ${left.incomplete} with parts not all in yet, ${left.conflicting} whose parts ` +
        `disagree, ${left.partial} of Partial sums; ${left.compacted} compacted rows`;
    } else {
      h3.textContent = `${multi ? `${t.name} · ` : ''}rank ${t.rank} · pid ${t.pid} · ${t.rows.length} tensors` +
        (t.shards ? ` (${t.shards} of them this rank's parts)` : '') + columns;
      h3.title = '';
    }
    const canvas = el.querySelector('canvas');
    canvas.width = width;
    drawOverviewTable(canvas, t, scale);
    return el;
  });
  box.replaceChildren(...els);
  renderBanner(data);
}

// What the banner calls the first anomaly of each type, in the order it names them.
const FIRST_OF_TYPE = [['non_finite', 'First NaN/Inf'], ['explosion', 'First explosion'], ['dead_units', 'Dead units'],
  ['divergence', 'First divergence from the reference']];

// The first anomaly of each type over every session (the server's: the earliest step, then
// forward order, then rank), and how many others.
export function renderBanner(data) {
  const firsts = data.firsts || {}, others = [];
  let count = 0;
  for (const s of data.sources) {
    const a = s.anomalies || {};
    count += a.count || 0;
    others.push(...(a.others || []));
  }
  const banner = $('banner');
  banner.hidden = count === 0;
  if (!count) return;
  const named = FIRST_OF_TYPE.filter(([type]) => firsts[type]).map(([type, title]) => [firsts[type], title]);
  const lead = named.length ? named[0][0] : others[0];
  const more = count - named.length;
  const text = named.map(([a, title]) => `${title}: step ${a.step}, rank ${a.rank}, ${a.stream} (${a.kind})`).join(' · ');
  $('banner-text').textContent = (text || lead.message) + (more ? ` · ${more} more anomal${more === 1 ? 'y' : 'ies'}` : '');
  const same = (a, b) => a.type === b.type && a.step === b.step && a.rank === b.rank && a.stream === b.stream;
  banner.title = [...named.map(([a]) => a), ...others.filter((a) => !named.some(([n]) => same(n, a)))]
    .map((a) => a.message).join('\n');
  $('banner-show').onclick = () => openTile(lead.rank, lead.stream, lead.step);
}
export function showPage(page) {
  state.page = page;
  const overview = page === 'overview';
  $('overview-page').hidden = !overview;
  $('grid').hidden = overview;
  for (const id of ['show-overview', 'show-tiles']) $(id).classList.toggle('on', id === `show-${page}`);
  writeHash();
  if (overview) loadOverview(); else { state.order = ''; layout(); }
}

// A click on a rank's row of the ranks panel: its heatmap among the chosen (the latest
// first, at most CHOSEN_MAX), shown at once.
function chooseRank(r) {
  const k = state.ranks.ranks[r];
  const key = `${k.source}.${k.rank}.${k.pid}`;
  state.chosen = [key, ...(state.chosen || []).filter((c) => c !== key)].slice(0, CHOSEN_MAX);
  loadOverview();
}
// The tables to ask /api/overview for: every one, or with many ranks the chosen ones (at
// first the ranks that stand out, else the first).
function tablesParam() {
  const ranks = state.ranks;
  if (!ranks || ranks.ranks.length <= MANY_RANKS) return '';
  if (!state.chosen || !state.chosen.length) {
    const rows = ranks.outlier_ranks.length ? ranks.outlier_ranks.slice(0, CHOSEN_MAX) : [0];
    state.chosen = rows.map((r) => `${ranks.ranks[r].source}.${ranks.ranks[r].rank}.${ranks.ranks[r].pid}`);
  }
  return `&tables=${encodeURIComponent(state.chosen.join(','))}`;
}

let overviewBusy = false;
export async function loadOverview() {
  if (overviewBusy || !state.token) return;
  overviewBusy = true;
  try {
    const columns = Math.min(2000, Math.max(16, Math.floor($('overview-ranks').clientWidth || 600)));
    const metric = state.metric ? `&metric=${encodeURIComponent(state.metric)}` : '';
    const step = ranksStep() === null ? '' : `&step=${ranksStep()}`;
    const ranks = await fetch(`api/overview/ranks?t=${encodeURIComponent(state.token)}${metric}${step}`);
    if (ranks.ok) state.ranks = await ranks.json();
    const res = await fetch(`api/overview?t=${encodeURIComponent(state.token)}&columns=${columns}${metric}${tablesParam()}`);
    if (!res.ok) return;
    state.overview = await res.json();
    if (!state.metric && state.overview.metrics.length) state.metric = state.overview.metrics[0].name;
    const any = state.overview.sources.some((s) => s.tables.length);
    if (state.page === null && any) showPage('overview');  // where the page lands when there is one
    if (state.page === 'overview') renderOverview(); else renderBanner(state.overview);
  } catch (e) {
    // the server restarts or the page goes: tried again at the next tick
  } finally {
    overviewBusy = false;
  }
}
export function pollOverview() {
  loadOverview();
  const reading = state.overview && state.overview.sources.some((s) => !s.complete);
  setTimeout(pollOverview, reading ? 300 : state.page === 'overview' ? 2000 : 5000);
}
