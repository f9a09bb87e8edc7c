// state.js — what the page knows (the tiles, the cursor, the overview, the counters for
// tests), the URL fragment it keeps them in (the token, filters, cursor, page, metric),
// and the addresses of the server's files.

export const state = {
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
  ranks: null,            // the last /api/overview/ranks answer
  chosen: null,           // with many ranks, the tables shown: ["source.rank.pid"]
};
window.tensorscopeView = state;  // for tests and the curious

export const $ = (id) => document.getElementById(id);

// ---- URL fragment: token, filters, cursor ----
export function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  // A link without the token (an anomaly's, from TensorBoard) uses the one this browser
  // last opened this server's page with.
  const key = `tensorscope-token:${location.host}`;
  state.token = p.get('t') || '';
  try {
    if (state.token) localStorage.setItem(key, state.token); else state.token = localStorage.getItem(key) || '';
  } catch (e) {
    // storage refused (a private window): links need their token
  }
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
export function writeHash() {
  const p = new URLSearchParams();
  p.set('t', state.token);
  if ($('filter-q').value) p.set('q', $('filter-q').value);
  for (const k of ['kind', 'rank', 'device']) if ($('filter-' + k).value) p.set(k, $('filter-' + k).value);
  if (state.cursor !== null) p.set('step', String(state.cursor));
  if (state.page) p.set('page', state.page);
  if (state.metric) p.set('metric', state.metric);
  history.replaceState(null, '', '#' + p.toString());
}

// The address of a file of session `source` (a video, a PNG), with the token.
export function fileUrl(source, path) {
  return `files/${source}/${path.split('/').map(encodeURIComponent).join('/')}?t=${encodeURIComponent(state.token)}`;
}
