// The console's API client (docs/console.md, "The API"): every request
// goes through request(), which sends the bearer token in the
// Authorization header (never in a URL), marks every change with the
// console's header and a JSON body, and turns an error answer into an
// ApiError carrying the server's own message.

const TOKEN_KEY = 'gostream-console-token';

// The token lives in this tab's sessionStorage only: it is gone when the
// tab closes, and "Sign out" removes it.
export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError is an answer that was not a success: status is the HTTP
// status (0 when the node did not answer at all), code the API's code
// ("Unauthorized", "GroupNotEmpty", ...), message what the server said.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

// Listeners of an answer 401: the app shows the sign-in form.
const unauthenticated = new Set();

export function onUnauthenticated(fn) {
  unauthenticated.add(fn);
}

// url is the address of an API path relative to the page (/ui/), with
// query parameters; those that are null, undefined or '' are left out.
export function url(path, query) {
  const u = new URL('api/' + path, document.baseURI);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== null && v !== undefined && v !== '') u.searchParams.set(k, String(v));
  }
  return u.pathname + u.search;
}

function headers(method) {
  const h = {Accept: 'application/json'};
  const t = token();
  if (t) h.Authorization = 'Bearer ' + t;
  if (method !== 'GET' && method !== 'HEAD') {
    // The server refuses a change without these (cross-site requests
    // cannot send them without a preflight, which it never allows).
    h['X-Gostream-Console'] = '1';
    h['Content-Type'] = 'application/json';
  }
  return h;
}

// request sends one API request and returns its JSON answer (null for
// 204). It throws an ApiError for any other answer.
export async function request(method, path, {query, body, signal} = {}) {
  let res;
  try {
    res = await fetch(url(path, query), {
      method,
      headers: headers(method),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'Unreachable', 'the node did not answer (' + err.message + '); is it running?');
  }
  if (res.status === 204) return null;
  if (res.ok) return res.json();
  throw await errorOf(res);
}

// errorOf makes an ApiError of an answer that is not a success: the
// API's JSON error, or the text of one from the HTTP layer (a 401 of the
// node's authentication is plain text).
export async function errorOf(res) {
  let code = String(res.status);
  let message = res.statusText || 'HTTP ' + res.status;
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    if (body && body.error) {
      message = body.error;
      code = body.code || code;
    }
  } catch {
    if (text.trim()) message = text.trim();
  }
  if (res.status === 401) {
    code = 'Unauthenticated';
    for (const fn of unauthenticated) fn(message);
  }
  return new ApiError(res.status, code, message);
}

export const get = (path, query, opts) => request('GET', path, Object.assign({query}, opts));
export const post = (path, body) => request('POST', path, {body});
export const del = (path, body) => request('DELETE', path, {body});

// events reads a text/event-stream answer with fetch, so that it can
// send the Authorization header (EventSource cannot): onOpen() once the
// node has answered, then onEvent(name, data) for each event. It
// resolves when the stream ends and rejects with an ApiError when the
// request fails; abort it with signal.
export async function events(path, query, {onOpen, onEvent, signal}) {
  let res;
  try {
    res = await fetch(url(path, query), {
      headers: Object.assign(headers('GET'), {Accept: 'text/event-stream'}),
      signal,
      cache: 'no-store',
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'Unreachable', 'the node did not answer (' + err.message + ')');
  }
  if (!res.ok) throw await errorOf(res);
  if (onOpen) onOpen();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let name = 'message';
  let data = [];
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length) onEvent(name, data.join('\n'));
        name = 'message';
        data = [];
      } else if (line.startsWith(':')) {
        // A comment: the server's keep-alive.
      } else {
        const colon = line.indexOf(':');
        const fieldName = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (fieldName === 'event') name = v;
        else if (fieldName === 'data') data.push(v);
      }
    }
  }
}
