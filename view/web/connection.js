// connection.js — the one WebSocket to the server (docs/design/live_view.md): frames
// (binary: a JSON header and a JPEG), the tile list, the health of every session, frames
// of finished videos and steps without a frame; reconnects after a drop.
import { $, state } from './state.js';
import { formatAge } from './format.js';
import { layout, refreshOptions, sendWatch, showImage, updateCaption } from './tiles.js';
import { loadVideos, requestVideoFrame } from './videos.js';

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
  const names = m.sources.map((s) => s.label || s.session || s.dir);
  $('sessions').textContent = names.length > 6 ? `${names.length} sessions: ${names[0]} … ${names[names.length - 1]}` : names.join(', ');
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
export function connect() {
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
export function showMessage(text) {
  $('message').hidden = !text;
  $('message').textContent = text;
}
