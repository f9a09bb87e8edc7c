// overview_ranks.js — the overview of many ranks: one metric at one step, a row per rank
// (of every session: every node), a column per tracked tensor, on the overview's colour
// scale, the outlier cells (the server's: recording/rank_outliers.h) ringed and their
// ranks marked at the left edge; a step slider; hover names the cell; a click on a row
// chooses that rank, whose tensors-by-steps heatmap the overview then shows.
import { $, state } from './state.js';
import { formatValue } from './format.js';
import { paintCells } from './overview_cells.js';

const MARK = [255, 64, 160];  // the outliers' ring and the marks of their ranks
let stepAsked = null;          // the slider's step; null: follow the newest

// The rank row's name: its rank, and its session where there are several.
function rankName(data, r) {
  const k = data.ranks[r];
  return state.overview && state.overview.sources.length > 1 ? `rank ${k.rank} · ${sourceName(k.source)}` : `rank ${k.rank}`;
}
function sourceName(source) {
  const s = state.overview && state.overview.sources.find((x) => x.source === source);
  return s && s.name ? s.name : `session ${source}`;
}
const CAPTION = 'a row per rank, a column per tracked tensor (forward order) · click a row for its tensors over the steps';

function draw(canvas, data, scale) {
  const n = data.ranks.length, m = data.columns.length;
  const rowH = Math.max(2, Math.min(14, Math.floor(900 / Math.max(1, n))));  // (2 px: a row a mouse can point at)
  const ctx = canvas.getContext('2d');
  const labels = rowH >= 10;
  const plot = { x: labels ? 150 : 56, y: 2, w: Math.max(1, canvas.width - (labels ? 150 : 56) - 4), h: n * rowH };
  canvas.height = plot.h + 8;
  ctx.fillStyle = '#1f2226';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  if (!n || !m) return;
  paintCells(ctx, plot, data.values, data.nonfinite, scale);
  const cw = plot.w / m;
  ctx.strokeStyle = `rgb(${MARK})`; ctx.lineWidth = 2;
  ctx.fillStyle = `rgb(${MARK})`;
  for (const [r, c] of data.outliers) {
    ctx.strokeRect(plot.x + c * cw - 1, plot.y + r * rowH - 1, Math.max(3, cw) + 2, Math.max(3, rowH) + 2);
  }
  for (const r of data.outlier_ranks) ctx.fillRect(plot.x - 10, plot.y + r * rowH, 7, Math.max(2, rowH));
  ctx.font = '11px ui-monospace, monospace';
  ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
  const marked = new Set(data.outlier_ranks);
  const every = labels ? 1 : Math.ceil(14 / rowH);
  for (let r = 0; r < n; r++) {
    if (r % every !== 0 && !marked.has(r)) continue;
    ctx.fillStyle = marked.has(r) ? `rgb(${MARK})` : '#e6e8eb';
    ctx.fillText(labels ? rankName(data, r) : String(data.ranks[r].rank), plot.x - 14, plot.y + (r + 0.5) * rowH);
  }
  canvas.ranks = { data, plot, rowH };
}

// The cell under client point (x, y), or null.
function cellAt(canvas, x, y) {
  const o = canvas.ranks;
  if (!o) return null;
  const b = canvas.getBoundingClientRect();
  const px = (x - b.left) * canvas.width / b.width, py = (y - b.top) * canvas.height / b.height;
  const c = Math.floor((px - o.plot.x) * o.data.columns.length / o.plot.w), r = Math.floor((py - o.plot.y) / o.rowH);
  if (r < 0 || r >= o.data.ranks.length || c < 0 || c >= o.data.columns.length) return null;
  const outlier = o.data.outliers.find(([orow, ocol]) => orow === r && ocol === c);
  return { r, c, outlier, value: o.data.values[r][c], nonfinite: !!o.data.nonfinite[r][c] };
}

// For tests: the client point of the cell of rank row `r`, column of tensor `stream`.
state.rankCellCenter = (r, stream) => {
  const canvas = document.querySelector('#overview-many canvas');
  const o = canvas && canvas.ranks;
  if (!o) return null;
  const c = o.data.columns.indexOf(stream);
  if (c < 0 || r < 0 || r >= o.data.ranks.length) return null;
  const b = canvas.getBoundingClientRect();
  return { x: b.left + (o.plot.x + (c + 0.5) * o.plot.w / o.data.columns.length) * b.width / canvas.width,
           y: b.top + (o.plot.y + (r + 0.5) * o.rowH) * b.height / canvas.height };
};

// The panel for `data` (an /api/overview/ranks answer) on `scale`; onChoose(rankRow) when a
// row is clicked, onStep() when the slider moves.
export function renderRanks(data, scale, metricTitle, onChoose, onStep) {
  const box = $('overview-many');
  box.hidden = !data || data.ranks.length < 2;
  if (box.hidden) return;
  if (!box.firstChild) {
    const bar = document.createElement('div');
    bar.className = 'many-bar';
    const label = document.createElement('span');
    const slider = document.createElement('input');
    slider.type = 'range'; slider.id = 'overview-step';
    slider.oninput = () => {  // (at its end: follow the newest step again)
      stepAsked = Number(slider.value) >= Number(slider.max) ? null : Number(slider.value);
      label.textContent = `step ${slider.value}`;
    };
    slider.onchange = () => onStep();
    const summary = document.createElement('span');
    summary.id = 'overview-outliers';
    const canvas = document.createElement('canvas');
    canvas.addEventListener('mousemove', (e) => {
      const cell = cellAt(canvas, e.clientX, e.clientY);
      const tip = $('overview-tip');
      tip.hidden = !cell;
      if (!cell) return;
      const d = canvas.ranks.data;
      tip.textContent = `${d.columns[cell.c]}\n${rankName(d, cell.r)} · pid ${d.ranks[cell.r].pid} · step ${d.step}\n` +
        `${metricTitle()}: ${formatValue(cell.value)}` + (cell.nonfinite ? '\nNaN/Inf in this tensor' : '') +
        (cell.outlier ? `\noutlier: ${cell.outlier[2] === null ? 'non-finite' : `${cell.outlier[2].toFixed(1)} spreads from the ranks' median`}` : '');
      tip.style.left = `${Math.min(innerWidth - 300, e.clientX + 14)}px`;
      tip.style.top = `${e.clientY + 14}px`;
    });
    canvas.addEventListener('mouseleave', () => { $('overview-tip').hidden = true; });
    canvas.addEventListener('click', (e) => {
      const cell = cellAt(canvas, e.clientX, e.clientY);
      if (cell) onChoose(cell.r);
    });
    const caption = document.createElement('div');
    caption.className = 'many-caption';
    caption.textContent = CAPTION;
    bar.append(label, slider, summary);
    box.append(bar, canvas, caption);
  }
  const [bar, canvas] = box.children;
  const [label, slider, summary] = bar.children;
  slider.min = String(data.first_step ?? 0); slider.max = String(data.last_step ?? 0);
  if (document.activeElement !== slider) slider.value = String(data.step ?? 0);
  label.textContent = `step ${data.step ?? '–'}` + (data.steps_per_column > 1 ? ` (a block of ${data.steps_per_column})` : '');
  const names = data.outlier_ranks.slice(0, 8).map((r) => rankName(data, r));
  summary.textContent = `${data.ranks.length} ranks × ${data.columns.length} tensors · ` +
    (names.length ? `stand out: ${names.join(', ')}${data.outlier_ranks.length > 8 ? ` and ${data.outlier_ranks.length - 8} more` : ''}`
      : 'no rank stands out');
  summary.classList.toggle('found', names.length > 0);
  canvas.width = Math.max(320, box.clientWidth || 800);
  draw(canvas, data, scale);
}

// The step the panel asks for (null: the newest).
export function ranksStep() { return stepAsked; }
