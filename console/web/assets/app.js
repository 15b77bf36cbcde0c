// The console's page: sign-in, the layout, routing between screens (by
// the URL's hash: #/topics/orders), and the refresh of the screen shown
// every five seconds while the tab is visible.
//
// Nothing of the cluster is shown until GET /ui/api/whoami answers:
// with authentication on, that needs a token, which the sign-in form
// keeps in this tab's sessionStorage.

import * as api from './api.js';
import {clear, el, messageOf} from './dom.js';
import {clock} from './format.js';
import overview from './screens/overview.js';
import topics from './screens/topics.js';
import topic from './screens/topic.js';
import messages from './screens/messages.js';
import groups from './screens/groups.js';
import group from './screens/group.js';
import streams from './screens/streams.js';
import security from './screens/security.js';
import history from './screens/history.js';
import charts from './screens/charts.js';

const REFRESH_MS = 5000;

// Routes: a hash path's pattern, its screen, and the nav entry it lights.
const routes = [
  [/^\/overview$/, overview, 'overview'],
  [/^\/topics$/, topics, 'topics'],
  [/^\/topics\/([^/]+)$/, topic, 'topics'],
  [/^\/messages$/, messages, 'messages'],
  [/^\/groups$/, groups, 'groups'],
  [/^\/groups\/([^/]+)$/, group, 'groups'],
  [/^\/streams$/, streams, 'streams'],
  [/^\/security$/, security, 'security'],
  [/^\/history$/, history, 'history'],
  [/^\/charts$/, charts, 'charts'],
];

const $ = (id) => document.getElementById(id);

let who = null; // the answer of whoami once signed in
let current = null; // {refresh, unmount, generation} of the screen shown
let generation = 0;
let timer = null;

// start asks the node who we are, with the token this tab holds if any,
// and shows the console or the sign-in form.
async function start() {
  try {
    who = await api.get('whoami');
  } catch (err) {
    $('starting').hidden = true;
    if (err.status === 401) {
      const refused = api.token();
      api.clearToken();
      showLogin(refused ? 'The node did not accept the token: ' + err.message : '');
    } else {
      $('starting').hidden = false;
      $('starting').textContent = 'The node did not answer: ' + messageOf(err) + '. Trying again in 5 s.';
      setTimeout(start, REFRESH_MS);
    }
    return;
  }
  $('starting').hidden = true;
  $('login').hidden = true;
  $('app').hidden = false;
  $('who-principal').textContent = who.principal || (who.security ? '(none)' : 'anyone (security off)');
  $('who-node').textContent = String(who.node);
  $('who-version').textContent = who.version || '';
  // Signed in by a client certificate, there is no token to forget.
  $('sign-out').hidden = !who.security || !api.token();
  $('insecure').hidden = who.security;
  route();
  if (!timer) timer = setInterval(tick, REFRESH_MS);
}

function showLogin(message) {
  stopScreen();
  who = null;
  // Nothing of the cluster stays in the page, shown or not.
  clear($('view'));
  $('crumbs').replaceChildren();
  $('title').textContent = '';
  $('app').hidden = true;
  $('login').hidden = false;
  const e = $('login-error');
  e.textContent = message;
  e.hidden = !message;
  $('login-token').focus();
}

$('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = $('login-token').value.trim();
  if (!t) return;
  api.setToken(t);
  $('login-token').value = '';
  start();
});

$('sign-out').addEventListener('click', () => {
  api.clearToken();
  showLogin('');
});

// Any answer 401 (a token revoked or expired meanwhile) ends the session
// in this tab.
api.onUnauthenticated((message) => {
  if (!who) return;
  api.clearToken();
  showLogin('Signed out: ' + message);
});

// parseHash splits "#/messages?topic=a" into its path and query.
function parseHash() {
  const h = location.hash.replace(/^#/, '') || '/overview';
  const q = h.indexOf('?');
  const path = q < 0 ? h : h.slice(0, q);
  const query = Object.fromEntries(new URLSearchParams(q < 0 ? '' : h.slice(q + 1)));
  return {path, query};
}

function stopScreen() {
  generation++;
  if (current && current.unmount) current.unmount();
  current = null;
}

// route shows the screen of the hash.
function route() {
  if (!who) return;
  const {path, query} = parseHash();
  let match = null;
  for (const [re, screen, nav] of routes) {
    const m = re.exec(path);
    if (m) {
      match = {screen, nav, params: m.slice(1).map(decodeURIComponent)};
      break;
    }
  }
  if (!match) {
    location.replace('#/overview');
    return;
  }
  stopScreen();
  const gen = generation;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.nav === match.nav);
    if (a.dataset.nav === match.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const view = $('view');
  clear(view);
  view.setAttribute('aria-busy', 'true');
  $('view-error').hidden = true;
  $('refreshed').textContent = '';
  $('crumbs').replaceChildren();
  setTitle(match.screen.title);
  const loading = el('p', {class: 'loading muted'}, 'Loading…');
  view.append(loading);
  const ctx = {
    params: match.params,
    query,
    who,
    api,
    setTitle,
    crumbs(...parts) {
      $('crumbs').replaceChildren(...parts.flatMap((p, i) => (i ? [' / ', p] : [p])));
    },
    live: () => gen === generation,
    // reload loads the screen's data again now (after a change).
    reload: () => refresh(),
    showError,
  };
  const body = el('div', {class: 'screen', hidden: true});
  view.append(body);
  current = Object.assign({generation: gen}, match.screen.mount(body, ctx) || {});
  refresh().finally(() => {
    if (gen !== generation) return;
    loading.remove();
    body.hidden = false;
    view.removeAttribute('aria-busy');
  });
}

function setTitle(t) {
  $('title').textContent = t;
  document.title = t + ' · gostream console';
}

// showError shows what went wrong above the screen; null hides it.
function showError(err) {
  const box = $('view-error');
  if (!err) {
    box.hidden = true;
    return;
  }
  box.textContent = messageOf(err) + (err.status >= 500 || err.status === 0 ? ' (trying again every 5 s)' : '');
  box.hidden = false;
}

// refresh loads the current screen's data once; a failure shows above
// the screen and leaves the data shown before in place.
async function refresh() {
  const c = current;
  if (!c || !c.refresh || c.busy) return;
  c.busy = true;
  try {
    await c.refresh();
    if (c === current) {
      showError(null);
      $('refreshed').textContent = c.auto === false ? '' : 'Updated ' + clock(Date.now());
      $('refreshed').dataset.at = String(Date.now());
    }
  } catch (err) {
    if (c === current && err.name !== 'AbortError' && err.status !== 401) showError(err);
  } finally {
    c.busy = false;
  }
}

// tick is the five-second refresh: lists and states reload themselves
// while the tab is visible; a screen with auto: false (a form, a tail)
// is left alone.
function tick() {
  if (document.hidden || !current || current.auto === false) return;
  refresh();
}

document.addEventListener('visibilitychange', () => {
  if (!document.hidden) tick();
});
window.addEventListener('hashchange', route);
start();
