// Drives headless Chromium (1280×800) through the dashboard of a running `harness serve`, checking
// what a maintainer sees: the matrix with its sparklines, the LKG page, a job's grid (cells,
// colours, legend, sticky headers), a conformance-sized job (results on the first screen, the tests
// skipped in every build hidden and shown by the toggle, a group collapsed), a filter, a cell
// followed to its build page and log, the failure clusters (the shared test's cluster, across two
// providers, likely Kubernetes-side), the flakiest tests, a suite's tests by provider with a skip's
// reason, and a 404. Saves a screenshot of each page
// and validates each page's HTML (html-validate's recommended rules).
//
//   node dashboard.mjs --url http://127.0.0.1:PORT --job FAILING_JOB --conformance-job JOB \
//     --shared-test NAME --screenshots DIR
//
// CHROMIUM names the browser (default: Debian's /usr/bin/chromium). Exits non-zero with the first
// failed check on stderr.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { HtmlValidate } from 'html-validate';
import { chromium } from 'playwright-core';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    job: { type: 'string' },
    'conformance-job': { type: 'string' },
    'shared-test': { type: 'string' },
    screenshots: { type: 'string' },
  },
});
for (const name of ['url', 'job', 'conformance-job', 'shared-test', 'screenshots']) {
  if (!args[name]) {
    console.error(`dashboard browser test: --${name} is required`);
    process.exit(2);
  }
}

// The dashboard's colours (dashboards/src/web/layout.rs), as the browser computes them.
const COLOURS = { pass: 'rgb(76, 175, 80)', fail: 'rgb(229, 57, 53)' };

function check(condition, message) {
  if (!condition) throw new Error(message);
}

mkdirSync(args.screenshots, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // Chromium's sandbox needs user namespaces, which a root CI container may not allow.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const errors = [];
try {
  const VIEWPORT = { width: 1280, height: 800 };
  const page = await browser.newPage({ viewport: VIEWPORT });
  page.on('pageerror', (error) => errors.push(`${page.url()}: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`${page.url()}: ${message.text()}`);
  });
  const validator = new HtmlValidate({ extends: ['html-validate:recommended'] });
  // Screenshots the page, and validates the HTML the server sent for it.
  const shot = async (name, { fullPage = true } = {}) => {
    await page.screenshot({ path: join(args.screenshots, `${name}.png`), fullPage });
    const html = await (await fetch(page.url())).text();
    const report = await validator.validateString(html);
    const problems = report.results.flatMap((result) => result.messages)
      .map((m) => `${m.ruleId} at ${m.selector ?? `${m.line}:${m.column}`}: ${m.message}`);
    check(report.valid, `${page.url()} is not valid HTML:\n${problems.join('\n')}`);
  };
  const colour = (locator) => locator.evaluate((element) => getComputedStyle(element).backgroundColor);
  const visit = async (path, status = 200) => {
    const response = await page.goto(new URL(path, args.url).href);
    check(response.status() === status, `${path}: status ${response.status()}, expected ${status}`);
  };

  // The matrix: a cell per provider × minor, coloured by the latest build, with a text equivalent.
  await visit('/');
  const failingCell = page.locator('table.matrix td.fail').first();
  check(await failingCell.count() === 1, 'the matrix has no failing cell');
  check(await colour(failingCell) === COLOURS.fail, `a failing matrix cell is ${await colour(failingCell)}`);
  check(/latest build \S+ fail/.test(await failingCell.getAttribute('aria-label')), 'a matrix cell has no text equivalent');
  check(await colour(page.locator('table.matrix td.pass').first()) === COLOURS.pass, 'a passing matrix cell is not green');
  check(await page.locator('section.versionset').count() === 1, 'the LKG version set is not on top of the matrix');
  // Every job's sparklines, each an image with its values in text.
  const sparks = page.locator('svg.spark');
  check(await sparks.count() >= 2, `the home page has ${await sparks.count()} sparklines`);
  const unlabelled = await sparks.evaluateAll((svgs) => svgs.filter((svg) =>
    svg.getAttribute('role') !== 'img' || !/oldest first: \S/.test(svg.getAttribute('aria-label') ?? '')
    || !svg.querySelector('title')).length);
  check(unlabelled === 0, `${unlabelled} sparklines have no text equivalent`);
  await shot('matrix');

  // The LKG page: each provider's history as an SVG, a labelled square per pair.
  await visit('/lkg');
  const squares = page.locator('svg.history rect');
  check(await squares.count() >= 2, `the LKG history has ${await squares.count()} squares`);
  const fill = (locator) => locator.evaluate((element) => getComputedStyle(element).fill);
  check(await fill(page.locator('svg.history rect.good').first()) === COLOURS.pass, 'a good pair is not green');
  check(await fill(page.locator('svg.history rect.bad').first()) === COLOURS.fail, 'a bad pair is not red');
  check((await page.locator('svg.history rect title').first().textContent()).startsWith('Kubernetes '), 'a square has no title');
  check(await page.locator('a', { hasText: 'compare' }).count() >= 1, 'the LKG page links no culprit range');
  await shot('lkg');

  // The failing job's grid.
  await page.getByRole('link', { name: 'matrix' }).click();
  await page.locator(`a[href="/job/${args.job}"]`).click();
  await page.waitForURL(`**/job/${args.job}`);
  const cells = page.locator('table.grid tbody td');
  const total = await cells.count();
  check(total > 0, 'the grid has no cells');
  const wordless = await cells.evaluateAll((tds) => tds.filter((td) => td.textContent !== td.className).length);
  check(wordless === 0, `${wordless} of ${total} grid cells do not say their state in text`);
  check(await page.locator('p.summary', { hasText: 'pass rate' }).count() === 1, 'the grid has no summary line');
  check(await page.locator('p.trend svg.spark[role=img]').count() === 2, 'the job page has no pass-rate and duration sparklines');
  const failed = page.locator('table.grid td.fail').first();
  check(await colour(failed) === COLOURS.fail, `a failed cell is ${await colour(failed)}`);
  check(await colour(page.locator('table.grid td.pass').first()) === COLOURS.pass, 'a passed cell is not green');
  check(await page.locator('ul.legend li').count() === 7, 'the legend does not list the seven cell states');
  const sticky = await page.locator('table.grid thead th').first().evaluate((th) => getComputedStyle(th).position);
  check(sticky === 'sticky', `the grid's header is ${sticky}, not sticky`);
  check(await page.getByText('failing since').count() >= 1, 'no test says since when it fails');
  await shot('grid');

  // A filter matching nothing, then one keeping the failing test.
  const rowCount = () => page.locator('table.grid tbody tr:not(.group)').count();
  await page.locator('input[name=test]').fill('^no such test$');
  await page.getByRole('button', { name: 'filter' }).click();
  await page.waitForURL(/test=/);
  check(await rowCount() === 0, `a filter matching nothing left ${await rowCount()} rows`);
  await page.locator('input[name=test]').fill('^ga');
  await page.locator('input[name=status]').fill('fail');
  await page.getByRole('button', { name: 'filter' }).click();
  await page.waitForURL(/status=fail/);
  check(await rowCount() === 1, `the filter ^ga + fail left ${await rowCount()} rows, expected 1`);
  await shot('grid-filtered');

  // Follow the failed cell to its build page, then to the whole log.
  const glyph = await page.locator('table.grid td.fail').first().evaluate((td) => getComputedStyle(td, '::before').content);
  check(glyph === '"F"', `a failed cell shows ${glyph}, not F`);
  // The gate row's failed cell, clicked: its column's build.
  const build = await page.locator('table.grid thead th a').first().innerText();
  await page.locator('table.grid tbody tr:not(.group)', { hasText: 'gate' }).locator('td.fail').first().click();
  await page.waitForURL(`**/job/${args.job}/build/${build}`);
  check((await page.locator('h1').innerText()).includes(build), 'the build page does not name its build');
  check(await page.locator('ol.steps li.fail', { hasText: 'Test' }).count() === 1, 'the build page shows no failed Test step');
  check(await page.locator('details.failure summary').count() >= 1, 'the build page lists no failure');
  const tail = await page.locator('pre.log').innerText();
  check(tail.trim().length > 0, 'the build page shows no log tail');
  await shot('build');
  const [log] = await Promise.all([page.waitForResponse(/build-log\.txt$/), page.getByRole('link', { name: 'build-log.txt' }).first().click()]);
  check(log.status() === 200 && (await log.text()).includes(tail.trim().split('\n').pop()), 'the whole log does not end like the tail');


  // A conformance-sized job at 1280×800: results on the first screen, not only names.
  await visit(`/job/${args['conformance-job']}`);
  const firstResult = page.locator('table.grid tbody tr:not(.group) td').first();
  const box = await firstResult.boundingBox();
  check(box && box.x >= 0 && box.y >= 0 && box.x + box.width <= VIEWPORT.width && box.y + box.height <= VIEWPORT.height,
    `the first result cell is at ${JSON.stringify(box)}, outside the first screen (${VIEWPORT.width}×${VIEWPORT.height})`);
  check(await firstResult.isVisible(), 'the first result cell is not visible');
  const nameWidth = await page.locator('table.grid thead th.test').evaluate((th) => th.getBoundingClientRect().width);
  check(nameWidth <= VIEWPORT.width / 2, `the name column is ${nameWidth} px wide`);
  const fullName = await page.locator('table.grid tbody tr:not(.group) th a').first().getAttribute('title');
  check(fullName && fullName.length > 0, 'a clipped test name has no full name on hover');
  check(await page.locator('table.grid .n', { hasText: '[It]' }).count() > 0, 'ginkgo\'s [It] is not shown lighter');
  const conformanceCells = page.locator('table.grid tbody td');
  const conformanceWordless = await conformanceCells.evaluateAll((tds) => tds.filter((td) => td.textContent !== td.className).length);
  check(conformanceWordless === 0, `${conformanceWordless} conformance grid cells do not say their state in text`);
  await shot('conformance-first-screen', { fullPage: false });

  // The tests skipped in every build are hidden, counted, and shown by the toggle.
  const testRows = () => page.locator('table.grid tbody tr:not(.group)').count();
  const hiddenRows = await testRows();
  const count = await page.locator('p.count').innerText();
  const hidden = Number((/([\d,]+) skipped in every shown build are hidden/.exec(count) ?? [])[1]?.replace(/,/g, ''));
  check(hidden > 1000, `the always-skipped tests are not hidden by default: ${count}`);
  await page.locator('#skipped-toggle').click();
  await page.waitForURL(/skipped=show/);
  const shownRows = await testRows();
  check(shownRows === hiddenRows + hidden, `the toggle showed ${shownRows} rows, expected ${hiddenRows} + ${hidden}`);
  await shot('conformance-skipped-shown', { fullPage: false });
  await page.locator('#skipped-toggle').click();
  await page.waitForURL((url) => !url.search.includes('skipped=show'));
  check(await testRows() === hiddenRows, 'hiding the always-skipped tests again did not');

  // A group collapses to its summary row.
  const group = page.locator('table.grid tbody.group').first();
  const groupRows = group.locator('tr:not(.group)');
  check(await groupRows.first().isVisible(), 'a group\'s rows are not shown');
  await group.locator('tr.group button').click();
  check(await groupRows.first().isHidden(), 'a collapsed group still shows its rows');
  check(await group.locator('tr.group button').getAttribute('aria-expanded') === 'false', 'a collapsed group says it is expanded');
  check(await group.locator('tr.group td').first().isVisible(), 'a collapsed group lost its summary cells');
  await shot('conformance-group-collapsed', { fullPage: false });

  // The failure clusters: the shared test's cluster spans both providers, likely Kubernetes-side.
  await page.getByRole('link', { name: 'failure clusters' }).click();
  await page.waitForURL('**/clusters');
  const row = page.locator('table.clusters tbody tr', { hasText: args['shared-test'] });
  check(await row.count() === 1, `the shared test is in ${await row.count()} clusters, expected 1`);
  check(await row.locator('.kubernetes-side').count() === 1, 'the shared test\'s cluster is not flagged likely Kubernetes-side');
  check((await row.locator('td').nth(1).innerText()) === 'north, south', `the cluster's providers: ${await row.locator('td').nth(1).innerText()}`);
  const gate = page.locator('table.clusters tbody tr', { hasText: 'gate' });
  check(await gate.locator('.provider-side').count() === 1, 'the gated provider\'s own failure is not flagged likely provider-side');
  await shot('clusters');
  await row.locator('th a').click();
  await page.waitForURL('**/clusters/*');
  check((await page.locator('p.verdict').innerText()).includes('likely Kubernetes-side: seen by north, south'), 'the cluster page does not say which side');
  check((await page.locator('table.clusters tbody tr').count()) === 2, 'the cluster page does not list both builds');
  check(await page.locator('table.clusters a[href*="/build/"]').count() === 2, 'the cluster page does not link its builds');
  await shot('cluster');

  // The flakiest tests of every job.
  await page.getByRole('link', { name: 'flakiest tests' }).first().click();
  await page.waitForURL('**/flaky');
  check(await page.locator('table.flaky tbody tr').count() >= 1, 'the flakiest tests list nothing');
  await shot('flaky');

  // The shared suite's tests by provider: north and south on one minor each, the shared failure
  // red in both, and the skip's reason a note its cell links to.
  await visit('/');
  await page.locator('p.suites').getByRole('link', { name: 'shared', exact: true }).click();
  await page.waitForURL('**/suite/shared');
  const headers = await page.locator('table.suite thead th a').allInnerTexts();
  check(JSON.stringify(headers.map((h) => h.replace(/\s+/g, ' '))) === JSON.stringify(['north 1.37', 'south 1.37']),
    `the suite table's columns: ${JSON.stringify(headers)}`);
  const sharedRow = page.locator('table.suite tbody tr', { hasText: args['shared-test'] });
  check(await sharedRow.locator('td.fail').count() === 2, 'the shared failure is not failed for both providers');
  check(await colour(sharedRow.locator('td.fail').first()) === COLOURS.fail, 'a failed suite cell is not red');
  const skipped = page.locator('table.suite tbody tr', { hasText: 'should support UDP' }).locator('td.skip a').first();
  await skipped.click();
  await page.waitForURL(/#note-\d+$/);
  const note = page.locator(`li${new URL(page.url()).hash}`);
  check((await note.innerText()).includes('load-balancer-udp'), `the skip's note says ${await note.innerText()}`);
  await shot('suite');

  check(errors.length === 0, `the pages logged errors:\n${errors.join('\n')}`);

  // An unknown job is a 404 page that says where to go (the browser logs the 404 itself).
  await visit('/job/no-such-job', 404);
  check((await page.locator('p.error').innerText()).includes('see the job list'), 'the 404 page says nothing useful');
  await shot('not-found');
  console.log(`dashboard browser test passed: ${total} grid cells checked, screenshots in ${args.screenshots}`);
} catch (error) {
  console.error(`dashboard browser test failed: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
