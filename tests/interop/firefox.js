// firefox.js: tests/interop.sh's second engine: headless Firefox ESR (Debian's
// firefox-esr, driven over WebDriver BiDi by puppeteer-core, never a
// downloaded browser) loads gzserve's demo page.
//
// Usage: node firefox.js CONFIG_JSON
//   CONFIG_JSON: {"name": "ff-zstd", "base": "http://127.0.0.1:PORT",
//                 "coding": "zstd"}
//   name     label of the check lines
//   coding   the Content-Encoding every page resource must arrive with
//            ("gzip", "zstd" or "br": gzserve --codings puts it first)
//
// Prints one line per check, "PASS firefox[NAME]: ..." or "FAIL ...", and
// exits 0 once every check has run (failed or not); any other exit status
// means the driver itself broke, which interop.sh counts as a failure.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const puppeteer = require('puppeteer-core');

const cfg = JSON.parse(process.argv[2]);
const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';
const STEP_MS = 20000;
const BODY_BG = 'rgb(244, 241, 234)'; // demo.c: body { background-color: #f4f1ea }

async function check(what, fn) {
  let why;
  try {
    why = await fn();
  } catch (err) {
    why = String(err && err.message ? err.message.split('\n')[0] : err);
  }
  console.log((why ? 'FAIL' : 'PASS') + ` firefox[${cfg.name}]: ${what}` + (why ? ` (${why})` : ''));
}

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mhdgz-ff-'));
  let browser;
  try {
    browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath: FIREFOX,
      headless: true,
      userDataDir: profile,
      protocolTimeout: STEP_MS,
      args: ['--no-remote'],
    });
    const page = await browser.newPage();
    const seen = new Map(); // path -> Content-Encoding of its first response
    page.on('response', (res) => {
      const u = new URL(res.url());
      if (res.url().startsWith(cfg.base) && !seen.has(u.pathname))
        seen.set(u.pathname, res.headers()['content-encoding'] || 'identity');
    });
    await check('the demo page loads (200)', async () => {
      const res = await page.goto(cfg.base + '/', { waitUntil: 'load', timeout: STEP_MS });
      if (!res || res.status() !== 200)
        return `status ${res ? res.status() : 'none'}`;
    });
    await check('the script ran (#js-ok written into the page)', async () => {
      await page.waitForSelector('#js-ok', { timeout: STEP_MS });
    });
    await check('the stylesheet applied (computed styles)', async () => {
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      if (bg !== BODY_BG)
        return `background ${bg}`;
    });
    await check(`the page's fetch('/100k.json') parsed, Content-Encoding ${cfg.coding}`, async () => {
      await page.waitForFunction(() => document.body.dataset.payloadCoding !== undefined, {
        timeout: STEP_MS,
      });
      const got = await page.evaluate(() => [document.body.dataset.payloadRecords,
                                             document.body.dataset.payloadCoding]);
      if (!(Number(got[0]) > 0))
        return `records ${got[0]}`;
      if (got[1] !== cfg.coding)
        return `Content-Encoding ${got[1]}`;
    });
    await check("the page's own EventSource showed 3 events", async () => {
      await page.waitForFunction(() => Number(document.body.dataset.events || 0) >= 3, {
        timeout: STEP_MS,
      });
    });
    for (const p of ['/', '/style.css', '/app.js', '/100k.json', '/events']) {
      await check(`${p} arrived ${cfg.coding}-compressed`, async () => {
        if (!seen.has(p))
          return 'no response seen';
        if (seen.get(p) !== cfg.coding)
          return `Content-Encoding: ${seen.get(p)}`;
      });
    }
  } catch (err) {
    console.log(`FAIL firefox[${cfg.name}]: driver: ${String(err && err.message ? err.message.split('\n')[0] : err)}`);
  } finally {
    if (browser)
      await browser.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
})();
