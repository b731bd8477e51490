// browser.js: tests/interop.sh's browser part: headless Chromium (Debian's,
// driven by playwright-core, never a downloaded browser) loads gzserve's page.
//
// Usage: node browser.js CONFIG_JSON
//   CONFIG_JSON: {"name": "demo", "base": "http://127.0.0.1:PORT",
//                 "out": "DIR", "events": true,
//                 "gzSizes": {"/app.js": 812, ...}}
//   name     label of the check lines and of the screenshot DIR/NAME.png
//   events   the server is the demo: /events must deliver events
//   gzSizes  optional: path -> the Content-Length the gzip response must have
//            (the size of a precompressed FILE.gz)
//   coding   optional: the Content-Encoding every page resource must arrive
//            with: "gzip" (the default), "zstd" or "br" (gzserve --codings)
//
// Prints one line per check, "PASS browser[NAME]: ..." or "FAIL ...", and
// exits 0 once every check has run (failed or not); any other exit status
// means the driver itself broke, which interop.sh counts as a failure.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const cfg = JSON.parse(process.argv[2]);
const CODING = cfg.coding || 'gzip';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// Per action; interop.sh bounds the whole driver with timeout(1) as well.
const STEP_MS = 15000;
// The demo's script and stylesheet leave these behind (see gzserve.c).
const BODY_BG = 'rgb(244, 241, 234)';  // body { background-color: #f4f1ea }
const MARKER_COLOR = 'rgb(47, 125, 50)'; // #js-ok { color: #2f7d32 }

function report(ok, what, detail) {
  const line = (ok ? 'PASS' : 'FAIL') + ` browser[${cfg.name}]: ${what}`;
  console.log(detail && !ok ? `${line} (${detail})` : line);
}

// Run one check; an exception is that check's failure, not the driver's.
async function check(what, fn) {
  try {
    const detail = await fn();
    report(detail === true || detail === undefined, what, detail);
  } catch (err) {
    report(false, what, String(err && err.message ? err.message.split('\n')[0] : err));
  }
}

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mhdgz-chromium-'));
  let context;

  try {
    // A fresh profile and nothing but loopback: no first-run, sync,
    // component updates or other background fetches, no proxy.
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      timeout: STEP_MS,
      viewport: { width: 1024, height: 900 },
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--no-proxy-server', '--disable-dev-shm-usage', // containers have a small /dev/shm
      ],
    });
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(STEP_MS);

    // The first response of each path, and everything that went wrong.
    const first = new Map();
    const errors = [];
    page.on('response', (res) => {
      const p = new URL(res.url()).pathname;
      if (res.url().startsWith(cfg.base) && !first.has(p))
        first.set(p, res);
    });
    page.on('pageerror', (err) => errors.push(String(err)));
    page.on('requestfailed', (req) => {
      // An EventSource the page closes itself counts as aborted; not ours.
      const f = req.failure();
      if (!(f && /ERR_ABORTED/.test(f.errorText) && req.resourceType() === 'eventsource'))
        errors.push(`${req.url()}: ${f ? f.errorText : '?'}`);
    });

    const nav = await page.goto(cfg.base + '/', { waitUntil: 'load' });
    if (nav)
      first.set('/', first.get('/') || nav);

    await check('the script ran (#js-ok written into the page)', async () => {
      await page.waitForSelector('#js-ok', { timeout: STEP_MS });
    });
    await check('the stylesheet applied (computed styles)', async () => {
      const st = await page.evaluate(() => ({
        bg: getComputedStyle(document.body).backgroundColor,
        marker: getComputedStyle(document.getElementById('js-ok')).color,
      }));
      if (st.bg !== BODY_BG)
        return `body background ${st.bg}, want ${BODY_BG}`;
      if (st.marker !== MARKER_COLOR)
        return `#js-ok color ${st.marker}, want ${MARKER_COLOR}`;
    });
    await check("fetch('/100k.json') parses as JSON", async () => {
      const r = await page.evaluate(async () => {
        const res = await fetch('/100k.json', { cache: 'no-store' });
        const doc = await res.json();
        return { status: res.status, records: Array.isArray(doc.data) ? doc.data.length : -1 };
      });
      if (r.status !== 200 || r.records <= 0)
        return `status ${r.status}, ${r.records} records`;
    });
    await check("the page's own fetch('/100k.json') parsed", async () => {
      await page.waitForFunction(() => document.body.dataset.payloadRecords, null,
                                 { timeout: STEP_MS });
    });

    if (cfg.events) {
      // Our own EventSource: 3 events, in order, and each as it happens
      // (one a second at the server), not all at once when the stream ends.
      await check('EventSource on /events: 3 events in order, as they happen', async () => {
        const got = await page.evaluate(() => new Promise((resolve, reject) => {
          const es = new EventSource('/events');
          const seen = [];
          const t0 = performance.now();
          const timer = setTimeout(() => { es.close(); reject(new Error(
            `${seen.length} events in 8 s`)); }, 8000);
          es.onmessage = (ev) => {
            const d = JSON.parse(ev.data);
            seen.push({ id: ev.lastEventId, n: d.n, at: Math.round(performance.now() - t0) });
            if (seen.length === 3) {
              clearTimeout(timer);
              es.close();
              resolve(seen);
            }
          };
        }));
        for (let i = 0; i < 3; i++)
          if (got[i].n !== i + 1 || got[i].id !== String(i + 1))
            return `out of order: ${JSON.stringify(got)}`;
        // 1 s apart at the server; 0.5 s allows for scheduling.
        if (got[1].at - got[0].at < 500 || got[2].at - got[1].at < 500)
          return `arrived together, not live: ${JSON.stringify(got)}`;
      });
      await check("the page's own EventSource showed 3 events", async () => {
        await page.waitForFunction(() => Number(document.body.dataset.events || 0) >= 3, null,
                                   { timeout: STEP_MS });
      });
    }

    if (cfg.events) {
      // The page draws /stats as inline SVG (app.js, no other script):
      // bytes before and after per coding, identity responses by reason.
      await check(`the /stats chart: ${CODING} bytes before and after, identity by reason (inline SVG)`, async () => {
        await page.waitForSelector('#stats svg g[data-coding]', { timeout: STEP_MS });
        const r = await page.evaluate(() => ({
          scripts: [...document.scripts].map((s) => s.src),
          codings: [...document.querySelectorAll('#stats svg g[data-coding]')].map((g) => ({
            c: g.dataset.coding, in: Number(g.dataset.in), out: Number(g.dataset.out),
            w: [...g.querySelectorAll('rect')].map((e) => Number(e.getAttribute('width'))),
          })),
          reasons: [...document.querySelectorAll('#stats svg g[data-reason]')].map((g) => ({
            r: g.dataset.reason, n: Number(g.dataset.n), rects: g.querySelectorAll('rect').length,
          })),
        }));
        if (r.scripts.length !== 1 || r.scripts[0] !== cfg.base + '/app.js')
          return `scripts ${JSON.stringify(r.scripts)}`;
        const mine = r.codings.find((x) => x.c === CODING);
        if (!mine || !(mine.out > 0 && mine.out < mine.in) || mine.w.length !== 2 ||
            !(mine.w[1] < mine.w[0]))
          return `bars ${JSON.stringify(r.codings)}`;
        if (r.reasons.some((x) => x.r === 'compressed' || !(x.n > 0) || x.rects !== 1))
          return `reasons ${JSON.stringify(r.reasons)}`;
      });
    }

    // Content-Encoding of everything the page loaded, as Chromium saw it.
    const paths = ['/', '/style.css', '/app.js', '/100k.json'];
    if (cfg.events)
      paths.push('/events');
    for (const p of paths) {
      await check(`${p} arrived ${CODING}-compressed`, async () => {
        const res = first.get(p);
        if (!res)
          return 'never requested';
        const h = await res.allHeaders();
        if (res.status() !== 200)
          return `status ${res.status()}`;
        if (h['content-encoding'] !== CODING)
          return `Content-Encoding: ${h['content-encoding'] || '(none)'}`;
        if (!/accept-encoding/i.test(h.vary || ''))
          return `Vary: ${h.vary || '(none)'}`;
        if (cfg.gzSizes && cfg.gzSizes[p] !== undefined &&
            Number(h['content-length']) !== cfg.gzSizes[p])
          return `Content-Length ${h['content-length']}, the .gz file has ${cfg.gzSizes[p]}`;
      });
    }

    await check('screenshot written', async () => {
      fs.mkdirSync(cfg.out, { recursive: true });
      const file = path.join(cfg.out, `${cfg.name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      if (fs.statSync(file).size < 1000)
        return `${file} is too small`;
    });

    // Reload: the cached gzip bodies are revalidated (Cache-Control:
    // no-cache, the ETag of the gzip variant) and the page still works.
    await check('reload revalidates and the page works again', async () => {
      const statuses = new Map();
      const onResponse = (res) => statuses.set(new URL(res.url()).pathname, res.status());
      page.on('response', onResponse);
      await page.reload({ waitUntil: 'load' });
      await page.waitForSelector('#js-ok', { timeout: STEP_MS });
      page.off('response', onResponse);
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      if (bg !== BODY_BG)
        return `body background ${bg} after reload`;
      for (const p of ['/', '/style.css', '/app.js'])
        if (![200, 304].includes(statuses.get(p)))
          return `${p}: status ${statuses.get(p)} after reload`;
    });

    await check('no script errors or failed requests', async () => {
      const real = cfg.events ? errors
        // A static tree has no /events or /stats: the page reports those itself.
        : errors.filter((e) => !/\/(events|stats)\b/.test(e));
      if (real.length)
        return real.join('; ');
    });
  } finally {
    if (context)
      await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err) => {
  console.log(`FAIL browser[${cfg.name}]: driver: ${String(err && err.message ? err.message.split('\n')[0] : err)}`);
  process.exit(1);
});
