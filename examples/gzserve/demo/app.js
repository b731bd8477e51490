// app.js: the gzserve demo's script: proves scripts, fetch() and
// EventSource all work through gzip.
'use strict';
function show(id, text) { document.getElementById(id).textContent = text; }
function markReady() {
  // The marker a headless browser test looks for.
  const ok = document.createElement('p');
  ok.id = 'js-ok';
  ok.textContent = 'JavaScript ran (it arrived compressed).';
  document.getElementById('live').prepend(ok);
  show('status', 'Loading /100k.json and listening on /events.');
}
async function loadPayload() {
  try {
    const res = await fetch('/100k.json');
    const doc = await res.json();
    const coding = res.headers.get('Content-Encoding') || 'identity';
    show('records', doc.data.length + ' records parsed (' +
         (res.headers.get('Content-Type') || '?') + ', Content-Encoding: ' + coding + ')');
    document.body.dataset.payloadCoding = coding;
    document.body.dataset.payloadRecords = String(doc.data.length);
  } catch (err) {
    show('records', 'failed: ' + err);
  }
}
// /stats as inline SVG: bytes before and after coding per coding, then
// the responses left identity, by reason.
function drawStats(st) {
  const NS = 'http://www.w3.org/2000/svg', ins = st.coded_bytes_in || {}, n = st.reasons;
  const cs = Object.keys(ins).filter((c) => ins[c] > 0);
  const rs = Object.keys(n).filter((r) => r !== 'compressed' && n[r] > 0);
  const maxB = Math.max(1, ...cs.map((c) => ins[c]));
  const maxN = Math.max(1, ...rs.map((r) => n[r]));
  const el = (up, name, at, text) => {
    const e = up.appendChild(document.createElementNS(NS, name));
    for (const k in at) e.setAttribute(k, at[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const svg = document.createElementNS(NS, 'svg');
  let y = 0;
  const bar = (g, label, v, max, fill) => {
    el(g, 'text', { x: 0, y: y + 14 }, label);
    el(g, 'rect', { x: 150, y: y + 3, height: 14, fill,
                    width: Math.max(1, Math.round(300 * v / max)) });
    el(g, 'text', { x: 456, y: (y += 20) - 6 }, v.toLocaleString('en'));
  };
  for (const c of cs) {
    const out = st.coded_bytes_out[c];
    const g = el(svg, 'g', { 'data-coding': c, 'data-in': ins[c], 'data-out': out });
    bar(g, c + ': bytes before', ins[c], maxB, '#ddd6c8');
    bar(g, c + ': bytes after', out, maxB, '#b4461e');
  }
  for (const r of rs)
    bar(el(svg, 'g', { 'data-reason': r, 'data-n': n[r] }), 'identity: ' + r, n[r], maxN,
        '#5b6670');
  for (const [k, v] of [['viewBox', '0 0 560 ' + Math.max(y, 20)], ['width', 560],
                        ['font-size', 12]])
    svg.setAttribute(k, v);
  document.getElementById('stats').replaceChildren(svg);
}
async function loadStats() {
  try {
    const res = await fetch('/stats', { cache: 'no-store' });
    drawStats(await res.json());
  } catch (err) {
    show('stats', 'stats failed: ' + err);
  }
}
function listen() {
  const list = document.getElementById('events');
  const source = new EventSource('/events');
  source.onmessage = (ev) => {
    const item = document.createElement('li');
    const data = JSON.parse(ev.data);
    item.textContent = 'event ' + data.n + ' of ' + data.of + ' at ' +
                       data.elapsed_ms + ' ms';
    list.appendChild(item);
    document.body.dataset.events = String(list.children.length);
    if (data.n === data.of) {
      item.className = 'done';
      source.close(); // the stream ended; do not reconnect
      loadStats();
    }
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED)
      show('status', 'The event stream closed.');
  };
}
markReady();
loadPayload();
loadStats();
listen();
