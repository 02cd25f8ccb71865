// Drives headless Chromium through a `harness serve` whose build holds hostile uploads: files
// that claim to be XHTML, SVG and HTML with a script in them. Checks that none of those scripts
// runs on the dashboard's origin (no console line, no request, no title, no storage of theirs),
// and that every dashboard page still works under its Content-Security-Policy: no CSP violation,
// the stylesheet applied, the grid's one script (allowed by hash) following a click.
//
//   node inert.mjs --url http://127.0.0.1:PORT --job JOB --build BUILD
//
// CHROMIUM names the browser (default: Debian's /usr/bin/chromium). Exits non-zero with the first
// failed check on stderr.

import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: args } = parseArgs({
  options: { url: { type: 'string' }, job: { type: 'string' }, build: { type: 'string' } },
});
for (const name of ['url', 'job', 'build']) {
  if (!args[name]) {
    console.error(`inert browser test: --${name} is required`);
    process.exit(2);
  }
}

// The hostile files of the build (harness/tests/cli_results.rs writes them).
const HOSTILE = ['artifacts/evil.xml', 'artifacts/evil.xhtml', 'artifacts/evil.svg', 'artifacts/evil.html'];

function check(condition, message) {
  if (!condition) throw new Error(message);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const ran = [];
const violations = [];
try {
  const context = await browser.newContext({ acceptDownloads: false });
  const page = await context.newPage();
  page.on('console', (message) => {
    const text = message.text();
    if (text.includes('pwned')) ran.push(`${page.url()}: console ${text}`);
    if (/Content Security Policy|Refused to/.test(text)) violations.push(`${page.url()}: ${text}`);
  });
  page.on('request', (request) => {
    if (request.url().includes('pwned')) ran.push(`request ${request.url()}`);
  });
  const base = args.url.replace(/\/$/, '');
  const visit = async (path) => {
    const response = await page.goto(base + path);
    return response;
  };
  // A dashboard page: served with its policy, and no violation of it.
  const dashboardPage = async (path) => {
    violations.length = 0;
    const response = await visit(path);
    const policy = response.headers()['content-security-policy'] || '';
    check(policy.startsWith("default-src 'none'") && !policy.includes('unsafe'), `${path}: policy ${policy}`);
    check(response.headers()['x-content-type-options'] === 'nosniff', `${path}: no nosniff`);
    const nav = await page.locator('nav[aria-label="site"]').evaluate((element) => getComputedStyle(element).backgroundColor);
    check(nav === 'rgb(34, 34, 51)', `${path}: the stylesheet did not apply (nav is ${nav})`);
    check(violations.length === 0, `${path} violates its policy:\n${violations.join('\n')}`);
  };

  for (const path of ['/', '/lkg', `/job/${args.job}`, `/job/${args.job}/build/${args.build}`, '/job/no-such-job']) {
    await dashboardPage(path);
  }
  // The grid's script (allowed by its hash) still opens a cell's build.
  await dashboardPage(`/job/${args.job}`);
  await page.locator('table.grid tbody td').first().click();
  await page.waitForURL(`**/job/${args.job}/build/*`);

  // Each hostile file, opened directly on the dashboard's origin: shown as text, nothing runs.
  for (const file of HOSTILE) {
    const url = `${base}/job/${args.job}/build/${args.build}/file/${file}`;
    let response = null;
    try {
      response = await page.goto(url);
    } catch (error) {
      // A download is not a document: nothing in it can run (the response is checked below).
      check(/Download is starting|net::ERR_ABORTED/.test(error.message), `${file}: ${error.message}`);
    }
    await page.waitForTimeout(300);
    check(ran.length === 0 && await page.title() !== 'pwned', `${file}'s script ran:\n${ran.join('\n')}`);
    if (response) {
      const type = response.headers()['content-type'] || '';
      check(type.startsWith('text/plain') || type.startsWith('application/octet-stream'), `${file} is served as ${type}`);
      check(response.headers()['x-content-type-options'] === 'nosniff', `${file}: no nosniff`);
      check((response.headers()['content-security-policy'] || '').includes('sandbox'), `${file}: no sandbox`);
    }
  }
  await visit('/');
  const stored = await page.evaluate(() => localStorage.getItem('pwned'));
  check(stored === null, 'a hostile file wrote to the dashboard origin\'s storage');
  check(ran.length === 0, `a hostile file's script ran:\n${ran.join('\n')}`);
  console.log(`inert browser test passed: ${HOSTILE.length} hostile files inert, 6 pages under their policy`);
} catch (error) {
  console.error(`inert browser test failed: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
