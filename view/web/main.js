// main.js — the live view's page: the overview (every tracked tensor of every rank over
// the steps, where the page lands), a tile per stream, newest frame (or the frame at the
// step cursor), filters kept in the URL, health, finished videos, the first anomaly.
// Talks to the server over one WebSocket (docs/design/live_view.md); every request
// carries the start's token, read from the URL fragment (#t=...), which never reaches a
// server log. The parts: state.js, connection.js, tiles.js, classes.js, videos.js,
// overview.js, and the pure format.js and overview_colors.js.
import { $, readHash, state, writeHash } from './state.js';
import { connect } from './connection.js';
import { layout, setCursor } from './tiles.js';
import { loadVideos } from './videos.js';
import { pollOverview, renderOverview, showPage } from './overview.js';

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
