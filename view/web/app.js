// The live view's page: the overview (every tracked tensor of every rank over the steps,
// where the page lands), a tile per stream, newest frame (or the frame at the step
// cursor), filters kept in the URL, health, finished videos, the first anomaly. Talks to the server over one
// WebSocket (docs/design/live_view.md); every request carries the start's token, read
// from the URL fragment (#t=...), which never reaches a server log.
'use strict';

const state = {
  token: '',
  tiles: new Map(),       // id -> tile info from the server
  order: '',              // the tile list last laid out
  cursor: null,           // null: live
  steps: null,            // {min, max}
  health: null,
  producers: new Map(),   // "source/pid" -> producer status
  visible: new Set(),
  ws: null,
  filesVersion: -1,
  stats: { frames: 0, lags: [], videoFrames: 0, noFrames: 0, messages: 0 },
  page: null,             // 'overview' | 'tiles'; null: not chosen (the overview when there is one)
  metric: '',             // the overview's metric ('' : the first)
  overview: null,         // the last /api/overview answer
};
window.tensorscopeView = state;  // for tests and the curious

const $ = (id) => document.getElementById(id);

// ---- URL fragment: token, filters, cursor ----
function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  state.token = p.get('t') || '';
  $('filter-q').value = p.get('q') || '';
  for (const k of ['kind', 'rank', 'device']) {
    const v = p.get(k) || '';
    const sel = $('filter-' + k);
    if (v && ![...sel.options].some((o) => o.value === v)) sel.add(new Option(v, v));
    sel.value = v;
  }
  if (['overview', 'tiles'].includes(p.get('page'))) state.page = p.get('page');
  state.metric = p.get('metric') || state.metric;
  const step = p.get('step');
  state.cursor = step !== null && step !== '' && Number.isFinite(Number(step)) ? Math.trunc(Number(step)) : null;
}
function writeHash() {
  const p = new URLSearchParams();
  p.set('t', state.token);
  if ($('filter-q').value) p.set('q', $('filter-q').value);
  for (const k of ['kind', 'rank', 'device']) if ($('filter-' + k).value) p.set(k, $('filter-' + k).value);
  if (state.cursor !== null) p.set('step', String(state.cursor));
  if (state.page) p.set('page', state.page);
  if (state.metric) p.set('metric', state.metric);
  history.replaceState(null, '', '#' + p.toString());
}

// ---- filters ----
function filterFn() {
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
function refreshOptions() {
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
function layout() {
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

function updateCaption(t) {
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
function formatAge(ms) {
  if (ms === undefined) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
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
function sendWatch() {
  if (watchTimer) return;
  watchTimer = setTimeout(() => {
    watchTimer = null;
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) return;
    state.ws.send(JSON.stringify({ type: 'watch', tiles: [...state.visible], cursor: state.cursor }));
  }, 50);
}

// ---- frames ----
function showImage(t, blob, step, legend) {
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

function onBinary(buffer) {
  const view = new DataView(buffer);
  const n = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, n)));
  const t = state.tiles.get(header.tile);
  state.stats.frames++;
  if (header.push_ns) {
    const lag = Date.now() - header.push_ns / 1e6;
    if (state.stats.lags.length < 100000) state.stats.lags.push(lag);
  }
  if (t) showImage(t, new Blob([new Uint8Array(buffer, 4 + n)], { type: 'image/jpeg' }), header.step, header.legend);
}

// ---- classes of pca / tsne frames (tensors pushed with labels) ----
// A frame's legend (header.legend: the plot's box and each class's legend entry, as
// fractions of the frame, with the class's colour) lets the pointer pick out a class:
// over its legend entry, the tile shows the frame with every pixel of the plot that is
// not near the class's colour dimmed.
const DIM = [28, 30, 34];  // the frames' background
function legendEntryAt(t, pointer) {
  const img = t.el && t.el.querySelector('img');
  if (!t.legend || !img || !img.naturalWidth) return -1;
  const r = img.getBoundingClientRect();  // object-fit: contain in the tile's box
  const scale = Math.min(r.width / img.naturalWidth, r.height / img.naturalHeight);
  const w = img.naturalWidth * scale, h = img.naturalHeight * scale;
  const x = (pointer.clientX - r.left - (r.width - w) / 2) / w, y = (pointer.clientY - r.top - (r.height - h) / 2) / h;
  return t.legend.classes.findIndex((c) => x >= c.box[0] && x <= c.box[2] && y >= c.box[1] && y <= c.box[3]);
}
function pointAtLegend(t, e) {
  t.pointer = { clientX: e.clientX, clientY: e.clientY };  // kept for the frames that follow
  const index = legendEntryAt(t, t.pointer);
  if (index !== (t.highlighted ?? -1)) highlightClass(t, index);
}
function highlightClass(t, index) {
  const canvas = t.el && t.el.querySelector('canvas.highlight');
  const img = t.el && t.el.querySelector('img');
  if (!canvas || !img) return;
  const entry = t.legend && index >= 0 ? t.legend.classes[index] : null;
  t.highlighted = entry ? index : -1;
  if (!entry || !img.naturalWidth) { canvas.hidden = true; return; }
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(img, 0, 0);
  const [x0, y0, x1, y1] = t.legend.plot.map((v, i) => Math.round(v * (i % 2 ? canvas.height : canvas.width)));
  if (x1 > x0 && y1 > y0) {
    const data = ctx.getImageData(x0, y0, x1 - x0, y1 - y0);
    const d = data.data, c = entry.color;
    for (let i = 0; i < d.length; i += 4) {
      const far = Math.abs(d[i] - c[0]) + Math.abs(d[i + 1] - c[1]) + Math.abs(d[i + 2] - c[2]) > 90;
      if (far) for (let k = 0; k < 3; k++) d[i + k] = Math.round(d[i + k] * 0.2 + DIM[k] * 0.8);
    }
    ctx.putImageData(data, x0, y0);
  }
  const b = entry.box;  // the legend entry, outlined
  ctx.strokeStyle = `rgb(${entry.color.join(',')})`;
  ctx.lineWidth = Math.max(1, canvas.width / 320);
  ctx.strokeRect(b[0] * canvas.width, b[1] * canvas.height, (b[2] - b[0]) * canvas.width, (b[3] - b[1]) * canvas.height);
  canvas.hidden = false;
}

// Frames of finished videos: a small pool of hidden video elements seeks each to the frame
// and copies it into the tile (the newest request per tile wins).
const extractor = { queue: [], busy: 0, latest: new Map() };
function requestVideoFrame(m) {
  extractor.latest.set(m.tile, m);
  extractor.queue.push(m);
  pumpExtractor();
}
function pumpExtractor() {
  while (extractor.busy < 3 && extractor.queue.length) {
    const m = extractor.queue.shift();
    if (extractor.latest.get(m.tile) !== m) continue;
    extractor.busy++;
    extractFrame(m).catch(() => {}).finally(() => { extractor.busy--; pumpExtractor(); });
  }
}
function fileUrl(source, path) {
  return `files/${source}/${path.split('/').map(encodeURIComponent).join('/')}?t=${encodeURIComponent(state.token)}`;
}
function extractFrame(m) {
  return new Promise((resolve, reject) => {
    const v = document.createElement('video');
    v.muted = true;
    v.preload = 'auto';
    const done = (ok) => { v.removeAttribute('src'); v.load(); ok ? resolve() : reject(); };
    const timer = setTimeout(() => done(false), 15000);
    v.onerror = () => { clearTimeout(timer); done(false); };
    v.onloadedmetadata = () => {
      const per = v.duration / Math.max(1, m.frames);
      v.currentTime = Math.min(v.duration, (m.frame + 0.5) * per);
    };
    v.onseeked = () => {
      clearTimeout(timer);
      const t = state.tiles.get(m.tile);
      if (!t || extractor.latest.get(m.tile) !== m) return done(true);
      const c = document.createElement('canvas');
      c.width = v.videoWidth; c.height = v.videoHeight;
      c.getContext('2d').drawImage(v, 0, 0);
      c.toBlob((blob) => {
        if (blob && extractor.latest.get(m.tile) === m) {
          state.stats.videoFrames++;
          showImage(t, blob, m.step);
        }
        done(true);
      }, 'image/jpeg', 0.9);
    };
    v.src = fileUrl(m.source, m.path);
  });
}

// ---- server messages ----
function onTiles(m) {
  state.steps = m.steps;
  let added = false;
  for (const info of m.tiles) {
    const t = state.tiles.get(info.id);
    if (t) Object.assign(t, info); else { state.tiles.set(info.id, info); added = true; }
  }
  if (added) refreshOptions();
  if (m.files_version !== state.filesVersion) {
    state.filesVersion = m.files_version;
    if (!$('videos-panel').hidden) loadVideos();
  }
  const range = $('cursor-range');
  if (m.steps) {
    range.min = m.steps.min; range.max = m.steps.max;
    if (state.cursor === null) { range.value = m.steps.max; $('cursor-step').value = m.steps.max; }
  }
  layout();
  for (const t of state.tiles.values()) updateCaption(t);
}

function onHealth(m) {
  state.health = m;
  state.producers.clear();
  let level = 'ok';
  const problems = [];
  const worse = (l) => { if (l === 'bad' || (l === 'warn' && level === 'ok')) level = l; };
  const rows = [];
  for (const s of m.sources) {
    const d = s.daemon || {};
    if (d.error) {
      rows.push([`session ${s.source}`, s.dir, `daemon: ${d.error.includes('no daemon runs') ? 'not running (files only)' : d.error}`]);
      if (!d.error.includes('no daemon runs') && !d.error.includes('files only')) { worse('warn'); problems.push(d.error); }
      continue;
    }
    const workers = d.workers || [];
    const dead = workers.filter((w) => !w.alive).length;
    const restarts = workers.reduce((a, w) => a + (w.restarts || 0), 0);
    if (dead) { worse('bad'); problems.push(`${dead} worker(s) down`); }
    if (restarts) { worse('warn'); problems.push(`${restarts} worker restart(s)`); }
    const out = d.output || {};
    if (out.state && out.state !== 'ok') { worse('bad'); problems.push(`output ${out.state}`); }
    let drops = 0;
    for (const p of d.producers || []) {
      state.producers.set(`${s.source}/${p.pid}`, p);
      drops += (p.dropped_full || 0) + (p.dropped_by_daemon || 0) + (p.refused || 0) + (p.dropped_invalid || 0);
    }
    if (drops) { worse('warn'); problems.push(`${drops} dropped`); }
    rows.push([`session ${s.source}`, s.dir, `daemon pid ${d.pid}, up ${formatAge(d.uptime_ms)}; ` +
      `${workers.length - dead}/${workers.length} workers, ${restarts} restarts; ` +
      `${(d.producers || []).length} producers, ${drops} dropped; output ${out.state || 'ok'}`]);
    for (const w of workers) {
      if (!w.alive || w.restarts || w.render_errors) {
        rows.push(['', `worker ${w.index}`, `${w.alive ? 'alive' : 'DOWN'}, ${w.restarts} restarts, ${w.render_errors} render errors, queue ${w.queue_depth}`]);
      }
    }
    if (s.index_error) { worse('warn'); problems.push(s.index_error); }
  }
  const srv = m.server;
  rows.push(['view', '', `${srv.boards} boards, ${srv.frames_read} frames read, ${srv.frames_lost} laps lost, ` +
    `${srv.frames_sent} sent; history ${(srv.store_bytes / 1048576).toFixed(1)} of ${(srv.store_cap / 1048576).toFixed(0)} MiB; ` +
    `${srv.connections} connections`]);
  const badge = $('health');
  badge.className = 'health ' + level;
  badge.textContent = level === 'ok' ? 'healthy' : problems.slice(0, 2).join(' · ');
  badge.title = problems.join('\n') || 'no problem seen';
  const table = document.createElement('table');
  for (const r of rows) {
    const tr = table.insertRow();
    for (const c of r) tr.insertCell().textContent = c;
  }
  $('health-panel').replaceChildren(table);
  $('sessions').textContent = m.sources.map((s) => s.session || s.dir).join(', ');
}

function onText(text) {
  const m = JSON.parse(text);
  state.stats.messages++;
  if (m.type === 'tiles') onTiles(m);
  else if (m.type === 'health') onHealth(m);
  else if (m.type === 'video_frame') requestVideoFrame(m);
  else if (m.type === 'no_frame') {
    const t = state.tiles.get(m.tile);
    state.stats.noFrames++;
    if (t) {
      t.noFrame = true;
      const img = t.el && t.el.querySelector('img');
      if (img) img.removeAttribute('src');
      updateCaption(t);
    }
  }
}

// ---- connection ----
function connect() {
  if (!state.token) {
    showMessage('This page needs the address tensorscope printed, with its #t=… part.');
    return;
  }
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${proto}//${location.host}/ws?t=${encodeURIComponent(state.token)}`);
  ws.binaryType = 'arraybuffer';
  state.ws = ws;
  ws.onopen = () => { showMessage(''); sendWatch(); };
  ws.onmessage = (e) => (typeof e.data === 'string' ? onText(e.data) : onBinary(e.data));
  ws.onclose = () => {
    $('health').className = 'health unknown';
    $('health').textContent = 'disconnected: retrying…';
    setTimeout(connect, 2000);
  };
}
function showMessage(text) {
  $('message').hidden = !text;
  $('message').textContent = text;
}

// ---- cursor ----
function setCursor(step) {
  state.cursor = step;
  $('live').classList.toggle('on', step === null);
  if (step !== null) { $('cursor-range').value = step; $('cursor-step').value = step; }
  for (const t of state.tiles.values()) { t.noFrame = false; updateCaption(t); }
  writeHash();
  sendWatch();
}

// ---- finished videos ----
async function loadVideos() {
  const res = await fetch(`api/videos?t=${encodeURIComponent(state.token)}`);
  if (!res.ok) return;
  const data = await res.json();
  const panel = $('videos-panel');
  const table = document.createElement('table');
  const keep = filterFn();
  let n = 0;
  for (const s of data.sources) {
    for (const f of s.files) {
      if (!keep(f)) continue;
      n++;
      const tr = table.insertRow();
      tr.insertCell().textContent = f.stream;
      tr.insertCell().textContent = `rank ${f.rank} · ${f.device} · ${f.mode}`;
      tr.insertCell().textContent = `steps ${f.first_step}–${f.last_step} (${f.frames} frames)`;
      const png = f.path.endsWith('.png');
      const play = document.createElement('button');
      play.textContent = png ? 'show' : 'play';
      play.onclick = () => {
        if (png) {
          const img = document.createElement('img');
          img.src = fileUrl(s.source, f.path); img.alt = f.path;
          play.replaceWith(img);
          return;
        }
        const v = document.createElement('video');
        v.controls = true; v.src = fileUrl(s.source, f.path);
        play.replaceWith(v);
        v.play().catch(() => {});
      };
      tr.insertCell().appendChild(play);
      const a = document.createElement('a');
      a.href = fileUrl(s.source, f.path); a.download = f.path.split('/').pop(); a.textContent = 'download';
      tr.insertCell().appendChild(a);
    }
  }
  panel.replaceChildren(n ? table : document.createTextNode('No finished video yet (a video is listed once its segment is finalized).'));
}


// ---- the overview: a heatmap per rank of one metric, a row per tracked tensor, a column
// per step (or block of steps); hover names the cell, click opens its tile at that step ----
const VIRIDIS = ['#440154', '#472d7b', '#3b528b', '#2c728e', '#21918c', '#28ae80', '#5ec962', '#addc30', '#fde725']
  .map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
const NONFINITE = [255, 0, 255], NO_VALUE = [56, 59, 64], BELOW = [0, 0, 0];
function viridis(t) {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + (VIRIDIS[i + 1][k] - c) * f));
}
// The colour scale of every rank together (so ranks compare): decades around the positive
// values on a log scale (from the smallest, or 2 decades below the 1st percentile), else 0..1.
function overviewScale(tables, log) {
  const vals = [];
  for (const t of tables) for (const row of t.values) for (const v of row) if (v !== null && (!log || v > 0)) vals.push(v);
  if (!vals.length) return null;
  if (!log) return { log, lo: 0, hi: Math.max(1, ...vals) };
  vals.sort((a, b) => a - b);
  const p1 = vals[Math.floor(vals.length / 100)];
  const lo = Math.max(Math.floor(Math.log10(vals[0])), Math.floor(Math.log10(p1)) - 2);
  let hi = Math.ceil(Math.log10(vals[vals.length - 1]));
  if (hi <= lo) hi = lo + 1;
  return { log, lo, hi };
}
function position(scale, v) {
  if (!scale.log) return (v - scale.lo) / (scale.hi - scale.lo);
  return v > 0 ? (Math.log10(v) - scale.lo) / (scale.hi - scale.lo) : -1;
}
function formatValue(v) {
  if (v === null) return 'no value';
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}
function scaleLabel(scale, e) { return scale.log ? (e >= -2 && e <= 3 ? String(10 ** e) : `1e${e}`) : String(e); }

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
  const img = ctx.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = t.values[r][c];
      let rgb = NO_VALUE;
      if (t.nonfinite[r][c]) rgb = NONFINITE;
      else if (v !== null && scale) { const p = position(scale, v); rgb = p < 0 ? BELOW : viridis(p); }
      const o = 4 * (r * cols + c);
      img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
    }
  }
  const tmp = document.createElement('canvas');
  tmp.width = cols; tmp.height = rows;
  tmp.getContext('2d').putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(tmp, plot.x, plot.y, plot.w, plot.h);
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
  return { r, c, stream: o.t.rows[r], rank: o.t.rank, first: o.t.first_steps[c], last: o.t.last_steps[c],
           value: o.t.values[r][c], nonfinite: !!o.t.nonfinite[r][c] };
}
function cellText(cell) {
  const steps = cell.first === cell.last ? `step ${cell.first}` : `steps ${cell.first}–${cell.last} (max)`;
  return `${cell.stream}\nrank ${cell.rank} · ${steps}\n${metricInfo().title}: ${formatValue(cell.value)}` +
    (cell.nonfinite ? ' (of its finite values)\nNaN/Inf in this tensor' : '');
}
function metricInfo() {
  const ms = (state.overview && state.overview.metrics) || [];
  return ms.find((m) => m.name === state.metric) || ms[0] || { name: '', title: '', log: true };
}
// For tests: the client point of the cell of (rank, stream) at `step`.
state.cellCenter = (rank, stream, step) => {
  for (const canvas of document.querySelectorAll('#overview-ranks canvas')) {
    const o = canvas.overview;
    if (!o || o.t.rank !== rank) continue;
    const r = o.t.rows.indexOf(stream);
    const c = o.t.first_steps.findIndex((f, i) => f <= step && step <= o.t.last_steps[i]);
    if (r < 0 || c < 0) return null;
    const b = canvas.getBoundingClientRect();
    return { x: b.left + (o.plot.x + (c + 0.5) * o.plot.w / o.cols) * b.width / canvas.width,
             y: b.top + (o.plot.y + (r + 0.5) * ROW_H) * b.height / canvas.height };
  }
  return null;
};

function renderOverview() {
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
  const tables = data.sources.flatMap((s) => s.tables.map((t) => ({ ...t, source: s.source })));
  const multi = data.sources.length > 1;
  const scale = overviewScale(tables, info.log);
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
  $('overview-note').textContent = tables.length ? (incomplete ? 'reading the summary tables…' : '')
    : 'No summaries yet: track a model (stats_every, on by default) to see every tensor here.';
  const box = $('overview-ranks');
  const width = Math.max(320, Math.floor((box.clientWidth - 12 * (tables.length - 1)) / Math.max(1, tables.length)));
  const most = Math.max(1, ...tables.map((t) => t.rows.length));
  ROW_H = Math.min(28, Math.max(12, Math.floor((innerHeight - box.getBoundingClientRect().top - AXIS_H - 40) / most)));
  const keep = new Map([...box.children].map((e) => [e.dataset.key, e]));
  const els = tables.map((t) => {
    const key = `${t.source}|${t.rank}|${t.pid}`;
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
    el.querySelector('h3').textContent = `${multi ? `session ${t.source} · ` : ''}rank ${t.rank} · pid ${t.pid}` +
      ` · ${t.rows.length} tensors` + (t.steps_per_column > 1 ? ` · a column = ${t.steps_per_column} steps` : '');
    const canvas = el.querySelector('canvas');
    canvas.width = width;
    drawOverviewTable(canvas, t, scale);
    return el;
  });
  box.replaceChildren(...els);
  renderBanner(data);
}

// What the banner calls the first anomaly of each type, in the order it names them.
const FIRST_OF_TYPE = [['non_finite', 'First NaN/Inf'], ['explosion', 'First explosion'], ['dead_units', 'Dead units']];

// The first anomaly of each type over every session (the earliest step, lowest rank
// first), and how many others.
function renderBanner(data) {
  const firsts = {}, others = [];
  let count = 0;
  for (const s of data.sources) {
    const a = s.anomalies || {};
    count += a.count || 0;
    others.push(...(a.others || []));
    for (const [type, f] of Object.entries(a.first || {})) {
      const g = firsts[type];
      if (!g || f.step < g.step || (f.step === g.step && f.rank < g.rank)) firsts[type] = f;
    }
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

function escapeRegExp(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); }
// The tiles of one stream of one rank, the cursor on `step`.
function openTile(rank, stream, step) {
  $('filter-q').value = `^${escapeRegExp(stream)}$`;
  const sel = $('filter-rank');
  if (![...sel.options].some((o) => o.value === String(rank))) sel.add(new Option(String(rank), String(rank)));
  sel.value = String(rank);
  $('filter-kind').value = ''; $('filter-device').value = '';
  showPage('tiles');
  setCursor(step);
  layout();
}

function showPage(page) {
  state.page = page;
  const overview = page === 'overview';
  $('overview-page').hidden = !overview;
  $('grid').hidden = overview;
  for (const id of ['show-overview', 'show-tiles']) $(id).classList.toggle('on', id === `show-${page}`);
  writeHash();
  if (overview) loadOverview(); else { state.order = ''; layout(); }
}

let overviewBusy = false;
async function loadOverview() {
  if (overviewBusy || !state.token) return;
  overviewBusy = true;
  try {
    const columns = Math.min(2000, Math.max(16, Math.floor($('overview-ranks').clientWidth || 600)));
    const metric = state.metric ? `&metric=${encodeURIComponent(state.metric)}` : '';
    const res = await fetch(`api/overview?t=${encodeURIComponent(state.token)}&columns=${columns}${metric}`);
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
function pollOverview() {
  loadOverview();
  const reading = state.overview && state.overview.sources.some((s) => !s.complete);
  setTimeout(pollOverview, reading ? 300 : state.page === 'overview' ? 2000 : 5000);
}

// ---- wiring ----
readHash();
$('live').classList.toggle('on', state.cursor === null);
for (const id of ['filter-q', 'filter-kind', 'filter-rank', 'filter-device']) {
  $(id).addEventListener('input', () => { writeHash(); layout(); if (!$('videos-panel').hidden) loadVideos(); });
}
$('live').onclick = () => setCursor(null);
$('cursor-range').addEventListener('input', (e) => setCursor(Math.trunc(Number(e.target.value))));
$('cursor-step').addEventListener('change', (e) => {
  const v = Number(e.target.value);
  if (Number.isFinite(v)) setCursor(Math.trunc(v));
});
$('toggle-videos').onclick = () => {
  const p = $('videos-panel');
  p.hidden = !p.hidden;
  $('toggle-videos').classList.toggle('on', !p.hidden);
  if (!p.hidden) loadVideos();
};
$('toggle-health').onclick = () => {
  const p = $('health-panel');
  p.hidden = !p.hidden;
  $('toggle-health').classList.toggle('on', !p.hidden);
};
$('health').onclick = () => $('toggle-health').click();
$('show-overview').onclick = () => showPage('overview');
$('show-tiles').onclick = () => showPage('tiles');
// Until the page is chosen: the tiles, and the overview once summaries turn up.
$('overview-page').hidden = state.page !== 'overview';
$('grid').hidden = state.page === 'overview';
if (state.page) showPage(state.page);
addEventListener('resize', () => { if (state.page === 'overview') renderOverview(); });
pollOverview();
window.addEventListener('hashchange', () => {
  const page = state.page;
  readHash();
  setCursor(state.cursor);
  if (state.page && state.page !== page) showPage(state.page); else layout();
});
connect();
