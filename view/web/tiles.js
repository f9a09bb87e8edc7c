// tiles.js — the tiles page: a tile per stream, rows the modules in model order (a
// stream beside its .grad), columns (session, rank, device); the filters; which tiles are
// on screen (the server sends only theirs); frames shown; the step cursor.
import { $, state, writeHash } from './state.js';
import { formatAge, escapeRegExp } from './format.js';
import { highlightClass, legendEntryAt, pointAtLegend } from './classes.js';
import { showPage } from './overview.js';

// ---- filters ----
export function filterFn() {
  const q = $('filter-q').value;
  let re = null;
  $('filter-q').classList.remove('bad');
  if (q) {
    try { re = new RegExp(q); } catch (e) { $('filter-q').classList.add('bad'); }
  }
  const kind = $('filter-kind').value, rank = $('filter-rank').value, device = $('filter-device').value;
  return (t) => (!re || re.test(t.stream)) && (!kind || t.kind === kind) &&
                (!rank || String(t.rank) === rank) && (!device || t.device === device);
}
export function refreshOptions() {
  const values = { kind: new Set(), rank: new Set(), device: new Set() };
  for (const t of state.tiles.values()) {
    values.kind.add(t.kind); values.rank.add(String(t.rank)); values.device.add(t.device);
  }
  for (const k of Object.keys(values)) {
    const sel = $('filter-' + k);
    const have = new Set([...sel.options].map((o) => o.value));
    const sorted = [...values[k]].sort((a, b) => (k === 'rank' ? a - b : a.localeCompare(b)));
    for (const v of sorted) if (!have.has(v)) sel.add(new Option(v, v));
  }
}

// ---- layout: rows are modules in model order (a stream next to its .grad), columns
// are (session, rank, device) ----
function rowName(stream) { return stream.endsWith('.grad') ? stream.slice(0, -5) : stream; }
export function layout() {
  const keep = filterFn();
  const shown = [...state.tiles.values()].filter(keep);
  const signature = shown.map((t) => t.id).join(',');
  $('filter-count').textContent = `${shown.length} of ${state.tiles.size} streams`;
  if (signature === state.order && $('grid').firstChild) return;
  state.order = signature;
  const rows = new Map(), cols = new Map();
  for (const t of shown) {  // ids grow in order of first appearance: the model's order
    const r = rowName(t.stream);
    if (!rows.has(r)) rows.set(r, new Map());
    const c = `${t.source}|${t.rank}|${t.device}`;
    if (!cols.has(c)) cols.set(c, { source: t.source, rank: t.rank, device: t.device });
    const cell = rows.get(r);
    if (!cell.has(c)) cell.set(c, []);
    cell.get(c).push(t);
  }
  const colKeys = [...cols.keys()].sort((a, b) => {
    const x = cols.get(a), y = cols.get(b);
    return x.source - y.source || x.rank - y.rank || x.device.localeCompare(y.device);
  });
  const multiSource = new Set([...cols.values()].map((c) => c.source)).size > 1;
  const table = document.createElement('table');
  table.className = 'grid';
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement('th'));
  for (const c of colKeys) {
    const th = document.createElement('th');
    const col = cols.get(c);
    th.textContent = `${multiSource ? 'session ' + col.source + ' · ' : ''}rank ${col.rank} · ${col.device}`;
    head.appendChild(th);
  }
  const body = table.createTBody();
  observer.disconnect();
  state.visible.clear();
  for (const [name, cells] of rows) {
    const tr = body.insertRow();
    const th = document.createElement('th');
    th.className = 'row';
    th.textContent = name;
    tr.appendChild(th);
    for (const c of colKeys) {
      const td = tr.insertCell();
      const div = document.createElement('div');
      div.className = 'cell';
      for (const t of (cells.get(c) || []).sort((a, b) => a.stream.localeCompare(b.stream) || a.mode.localeCompare(b.mode))) {
        div.appendChild(tileElement(t));
      }
      td.appendChild(div);
    }
  }
  $('grid').replaceChildren(table);
  if (shown.length === 0) {
    $('grid').replaceChildren(document.createTextNode(state.tiles.size ? 'No stream matches the filters.' : 'No stream yet: waiting for the first frames…'));
  }
  sendWatch();
}

function tileElement(t) {
  let fig = t.el;
  if (!fig) {
    fig = document.createElement('figure');
    fig.className = 'tile';
    fig.dataset.tile = t.id;
    const img = document.createElement('img');
    img.alt = t.stream;
    const highlight = document.createElement('canvas');  // a class of the frame picked out (legend hover)
    highlight.className = 'highlight';
    highlight.hidden = true;
    fig.addEventListener('mousemove', (e) => pointAtLegend(t, e));
    fig.addEventListener('mouseleave', () => { t.pointer = null; highlightClass(t, -1); });
    const cap = document.createElement('figcaption');
    for (const cls of ['name', 'step', 'meta', 'age', 'drops']) {
      const span = document.createElement('span');
      span.className = cls;
      cap.appendChild(span);
    }
    fig.append(img, highlight, cap);
    t.el = fig;
  }
  observer.observe(fig);
  updateCaption(t);
  return fig;
}

export function updateCaption(t) {
  const fig = t.el;
  if (!fig) return;
  const q = (c) => fig.querySelector('.' + c);
  q('name').textContent = t.stream;
  q('meta').textContent = `${t.mode} · ${t.kind}`;
  const shownStep = t.shownStep !== undefined ? t.shownStep : null;
  const step = q('step');
  if (t.noFrame) {
    step.textContent = 'no frame at this step';
    step.className = 'step none';
  } else {
    step.textContent = shownStep === null ? 'step –' : `step ${shownStep}`;
    step.className = 'step';
  }
  q('age').textContent = state.cursor === null && t.live ? `${formatAge(t.age_ms)} ago` : '';
  // What the tile's producer sends, in words: its pacing while the daemon is behind (the
  // raw drop counts of the whole producer are in the session's status row).
  const p = state.producers.get(`${t.source}/${t.pid}`);
  const stride = p ? p.pace_stride || 1 : 1;
  q('drops').textContent = stride > 1 ? `1 call in ${+stride.toFixed(1)} sent, daemon-limited` : '';
  fig.classList.toggle('stale', state.cursor === null && t.live && t.age_ms > 10000);
}

// ---- which tiles are on screen ----
const observer = new IntersectionObserver((entries) => {
  for (const e of entries) {
    const id = Number(e.target.dataset.tile);
    if (e.isIntersecting) state.visible.add(id); else state.visible.delete(id);
  }
  sendWatch();
}, { rootMargin: '200px' });

let watchTimer = null;
export function sendWatch() {
  if (watchTimer) return;
  watchTimer = setTimeout(() => {
    watchTimer = null;
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) return;
    state.ws.send(JSON.stringify({ type: 'watch', tiles: [...state.visible], cursor: state.cursor }));
  }, 50);
}

// ---- frames ----
export function showImage(t, blob, step, legend) {
  const img = t.el && t.el.querySelector('img');
  if (!img) return;
  const url = URL.createObjectURL(blob);
  const old = img.dataset.url;
  t.legend = legend || null;
  img.title = t.legend ? 'point at a class in the legend to pick out its points' : '';
  img.onload = () => {
    if (old) URL.revokeObjectURL(old);
    highlightClass(t, t.pointer ? legendEntryAt(t, t.pointer) : -1);  // where the pointer rests, in the new frame
  };
  img.onerror = () => URL.revokeObjectURL(url);
  img.dataset.url = url;
  img.src = url;
  t.shownStep = step;
  t.noFrame = false;
  updateCaption(t);
}

// ---- cursor ----
export function setCursor(step) {
  state.cursor = step;
  $('live').classList.toggle('on', step === null);
  if (step !== null) { $('cursor-range').value = step; $('cursor-step').value = step; }
  for (const t of state.tiles.values()) { t.noFrame = false; updateCaption(t); }
  writeHash();
  sendWatch();
}

// The tiles of one stream of one rank, the cursor on `step`.
export function openTile(rank, stream, step) {
  $('filter-q').value = `^${escapeRegExp(stream)}$`;
  const sel = $('filter-rank');
  if (![...sel.options].some((o) => o.value === String(rank))) sel.add(new Option(String(rank), String(rank)));
  sel.value = String(rank);
  $('filter-kind').value = ''; $('filter-device').value = '';
  showPage('tiles');
  setCursor(step);
  layout();
}
