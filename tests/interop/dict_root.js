// dict_root.js: tests/interop.sh's Chromium check of an RFC 9842 dictionary served from gzserve --root.
//
// Usage: node dict_root.js BASE
// The page at BASE fetches /lib.v1.js (a --dictionary FILE beneath the
// root, which advertises itself with Use-As-Dictionary), then /lib.v2.js
// until Chromium, having stored v1 (asynchronously, hence the retries a
// second apart, at most ten), asks with Available-Dictionary and gets dcz;
// v2 must then decode to its full length and run (appVersion 2). Prints
// "PASS chromium: ..." or "FAIL chromium: ..." lines, as browser.js does.
const os = require('os');
const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const base = process.argv[2];

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mhdgz-dict-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    timeout: 15000,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--no-proxy-server',
           '--disable-dev-shm-usage'],
  });
  try {
    const page = context.pages()[0] || (await context.newPage());
    await page.goto(base + '/', { waitUntil: 'load' });
    const r = await page.evaluate(async () => {
      const v1 = await (await fetch('/lib.v1.js')).text();
      for (let i = 0; i < 10; i++) {
        await new Promise((f) => setTimeout(f, 1000));
        const res = await fetch('/lib.v2.js', { cache: 'no-store' });
        const coding = res.headers.get('content-encoding');
        const text = await res.text();
        if (coding === 'dcz') {
          (0, eval)(text);
          const e = performance.getEntriesByName(new URL('/lib.v2.js', location).href).pop();
          return { v1: v1.length, tries: i + 1, len: text.length, version: globalThis.appVersion,
                   wire: e ? e.encodedBodySize : -1 };
        }
      }
      return { v1: v1.length, tries: 10 };
    });
    if (r.version === 2 && r.len === Number(process.argv[3]))
      console.log(`PASS chromium: --root: lib.v2.js as dcz against the ${r.v1}-byte lib.v1.js ` +
                  `(try ${r.tries}), ${r.len} bytes decoded from ${r.wire} on the wire, ran: appVersion 2`);
    else
      console.log(`FAIL chromium: --root: lib.v2.js as dcz (${JSON.stringify(r)})`);
  } finally {
    await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err) => {
  console.log(`FAIL chromium: --root dcz driver: ${String(err && err.message ? err.message.split('\n')[0] : err)}`);
  process.exit(1);
});
