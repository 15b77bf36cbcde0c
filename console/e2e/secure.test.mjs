// The console against a cluster with security on (TLS and tokens, as
// `make run SECURE=1`), set up by scripts/console-e2e.sh with the
// superuser admin and a principal viewer that may only describe: without
// a token no screen shows anything but the sign-in form and the API
// answers 401; the token is sent in the Authorization header only, kept
// in the tab's sessionStorage, and forgotten at sign-out; viewer sees
// the ACL form refused, and the node refuses viewer's change.

import assert from 'node:assert/strict';
import {after, before, test} from 'node:test';

import {env, launch, newPage, SCREENS, shot, show, viewError} from './lib.mjs';

const BASE = env('CONSOLE_URL');
const ADMIN = env('ADMIN_TOKEN');
const VIEWER = env('VIEWER_TOKEN');

// Signed out, the page's own whoami is answered 401, and the browser
// logs that as a failed load: expected here, and nothing else is.
const SIGNED_OUT = [/status of 401/];

let browser;

before(async () => {
  browser = await launch();
});

after(async () => {
  await browser?.close();
});

async function signIn(page, token) {
  await page.goto(BASE);
  await page.waitForSelector('#login:not([hidden])');
  await page.fill('#login-token', token);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('#app:not([hidden])');
}

test('without a token no screen shows data, only the sign-in form, and the API answers 401', async () => {
  const page = await newPage(browser, {allow: SIGNED_OUT, ignoreHTTPSErrors: true});
  for (const [name, hash] of SCREENS) {
    await page.goto(BASE + hash);
    await page.waitForSelector('#login:not([hidden])');
    assert.equal(await page.isHidden('#app'), true, `${name}: the console shows without a token`);
    const text = await page.evaluate(() => document.body.innerText);
    assert.doesNotMatch(text, /orders|broker|nobody sees/i, `${name}: the page shows cluster data without a token`);
  }
  await shot(page, 'login');

  const paths = ['whoami', 'overview', 'topics', 'topics/orders', 'topics/orders/messages', 'topics/orders/tail',
    'groups', 'groups/g', 'streams', 'acls', 'history', 'series', 'lag'];
  for (const p of paths) {
    const res = await page.request.get(BASE + 'api/' + p);
    assert.equal(res.status(), 401, `GET ${p} without a token: ${res.status()}`);
  }
  const res = await page.request.post(BASE + 'api/topics/orders/produce', {
    headers: {'X-Gostream-Console': '1', 'Content-Type': 'application/json'},
    data: {value: 'x'},
  });
  assert.equal(res.status(), 401);
  assert.deepEqual(page.problems, []);
  await page.context().close();
});

test('a wrong token is refused and the form says so', async () => {
  const page = await newPage(browser, {allow: SIGNED_OUT, ignoreHTTPSErrors: true});
  await page.goto(BASE);
  await page.waitForSelector('#login:not([hidden])');
  await page.fill('#login-token', 'not-a-token-of-this-cluster');
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('#login-error:not([hidden])');
  assert.match(await page.textContent('#login-error'), /did not accept the token/);
  assert.equal(await page.isHidden('#app'), true);
  assert.deepEqual(page.problems, []);
  await page.context().close();
});

test('signed in, the token goes in the Authorization header only, in sessionStorage, and sign-out forgets it', async () => {
  const page = await newPage(browser, {allow: SIGNED_OUT, ignoreHTTPSErrors: true});
  const requests = [];
  page.on('request', (r) => requests.push({url: r.url(), auth: r.headers()['authorization'] || ''}));
  await signIn(page, ADMIN);
  assert.equal(await page.isHidden('#insecure'), true, 'the security-off banner shows on a secure cluster');
  for (const [name, hash] of SCREENS) {
    await show(page, BASE, hash);
    assert.equal(await viewError(page), '', `${name}: the screen shows an error`);
  }
  const api = requests.filter((r) => r.url.includes('/ui/api/'));
  assert.ok(api.length >= SCREENS.length);
  for (const r of requests) assert.ok(!r.url.includes(ADMIN), `the token is in a URL: ${r.url}`);
  // The first whoami (before sign-in) had no token; every one after has.
  for (const r of api.slice(1)) assert.equal(r.auth, 'Bearer ' + ADMIN, `no token on ${r.url}`);
  assert.ok(!page.url().includes(ADMIN));
  const stored = await page.evaluate(() => ({session: Object.values(sessionStorage), local: localStorage.length, cookie: document.cookie}));
  assert.deepEqual(stored, {session: [ADMIN], local: 0, cookie: ''});

  await page.click('#sign-out');
  await page.waitForSelector('#login:not([hidden])');
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  assert.equal(await page.evaluate(() => document.getElementById('view').childElementCount), 0, 'the last screen stays in the page after sign-out');
  assert.deepEqual(page.problems, []);
  await page.context().close();
});

test('the superuser adds an ACL with the form and removes it from the list', async () => {
  const page = await newPage(browser, {allow: SIGNED_OUT, ignoreHTTPSErrors: true});
  await signIn(page, ADMIN);
  await show(page, BASE, '#/security');
  await page.fill('#acl-principal', 'bob');
  await page.selectOption('#acl-resource', 'topic');
  await page.fill('#acl-name', 'orders');
  await page.selectOption('#acl-operation', 'read');
  await page.click('#acl-add');
  await page.locator('#acl-result', {hasText: 'Added: bob may read topic orders'}).waitFor();
  const row = page.locator('#view tr', {hasText: 'bob'});
  await row.waitFor();
  await row.getByRole('button', {name: 'Remove'}).click();
  await page.locator('#acl-result', {hasText: 'Removed: bob may read topic orders'}).waitFor();
  await row.waitFor({state: 'detached'});
  assert.deepEqual(page.problems, []);
  await page.context().close();
});

test('a principal that may not alter the cluster sees the ACL form refused, and the node refuses its change', async () => {
  const page = await newPage(browser, {allow: SIGNED_OUT, ignoreHTTPSErrors: true});
  await signIn(page, VIEWER);
  await show(page, BASE, '#/security');
  await page.waitForSelector('#acl-refused');
  assert.match(await page.textContent('#acl-refused'), /needs alter on the cluster/);
  assert.equal(await page.isDisabled('#acl-add'), true);
  await shot(page, 'security-refused');

  // What the page would not send, the node refuses anyway.
  const refusal = await page.evaluate(async (token) => {
    const res = await fetch('api/acls', {
      method: 'POST',
      headers: {'Authorization': 'Bearer ' + token, 'X-Gostream-Console': '1', 'Content-Type': 'application/json'},
      body: JSON.stringify({principal: 'viewer', resource: 'cluster', name: '', pattern: 'literal', operation: 'alter'}),
    });
    return {status: res.status, body: await res.json()};
  }, VIEWER);
  assert.equal(refusal.status, 403, JSON.stringify(refusal));

  // Nor is reset-offsets offered without operate on the cluster.
  await show(page, BASE, '#/groups/native-readers');
  assert.equal(await page.locator('#reset-dry-run').count(), 0);

  // What the page offers but the node refuses shows the node's refusal:
  // viewer may not read the topic's records, nor write one.
  await show(page, BASE, '#/messages?topic=orders');
  await page.locator('#view .error').first().waitFor();
  assert.doesNotMatch(await page.locator('#msg-results').textContent(), /nobody sees/);
  await page.fill('#produce-value', 'from viewer');
  await page.click('#produce-form button[type=submit]');
  const refused = page.locator('#produce-form .error');
  await refused.waitFor();
  assert.match(await refused.textContent(), /\S/);
  await page.context().close();
});
