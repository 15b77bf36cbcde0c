// Building the page's DOM. Everything the cluster sends (topic names,
// record keys and values, error messages) enters the page as text
// nodes, never as markup: a record holding <script> is shown, not run.
// Nothing in the console parses a string as HTML (web_test.go checks).

const SVG_NS = 'http://www.w3.org/2000/svg';

// el makes an HTML element: el('td', {class: 'num'}, '12'). attrs keys
// are attributes, except `on*` functions (event listeners) and
// `hidden`/`disabled`/`checked`/`value` (properties). Children are
// nodes or strings (text); null, undefined and false are skipped, and
// arrays are flattened.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

// svg makes an SVG element, as el does an HTML one.
export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

const PROPERTIES = new Set(['hidden', 'disabled', 'checked', 'value', 'selected']);

function setAttrs(node, attrs) {
  if (!attrs) return;
  for (const [name, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (name.startsWith('on') && typeof v === 'function') {
      node.addEventListener(name.slice(2), v);
    } else if (PROPERTIES.has(name)) {
      node[name] = v;
    } else {
      node.setAttribute(name, v === true ? '' : String(v));
    }
  }
}

function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// fill replaces node's children with children, as el takes them (null
// and false skipped, strings as text).
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

// clear removes every child of node.
export function clear(node) {
  node.replaceChildren();
}

// section is a titled panel of a screen.
export function section(title, ...children) {
  return el('section', {class: 'panel'}, title ? el('h2', null, title) : null, ...children);
}

// note is a muted line of explanation.
export function note(...children) {
  return el('p', {class: 'muted note'}, ...children);
}

// errorBox shows what went wrong, as the server said it.
export function errorBox(err) {
  return el('p', {class: 'error', role: 'alert'}, messageOf(err));
}

// messageOf is the text an error shows the reader.
export function messageOf(err) {
  if (!err) return '';
  return err.message || String(err);
}

// link is an in-page link to another screen.
export function link(hash, text) {
  return el('a', {href: hash}, text);
}

// badge is a short label with a tone: ok, warn, bad or plain.
export function badge(text, tone) {
  return el('span', {class: 'badge ' + (tone || 'plain')}, text);
}

// button is a button that runs onClick; while the promise it returns is
// pending, the button is disabled.
export function button(text, onClick, attrs) {
  const b = el('button', Object.assign({type: 'button'}, attrs), text);
  b.addEventListener('click', async (ev) => {
    ev.preventDefault();
    if (b.disabled) return;
    b.disabled = true;
    try {
      await onClick(ev);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// field is a labelled form control.
export function field(label, control, hint) {
  return el('label', {class: 'field'}, el('span', {class: 'field-label'}, label), control, hint ? el('span', {class: 'muted hint'}, hint) : null);
}

// select makes a <select> of options, each a string or [value, label].
export function select(attrs, options, current) {
  const s = el('select', attrs);
  for (const o of options) {
    const [value, label] = Array.isArray(o) ? o : [o, o];
    s.append(el('option', {value, selected: String(value) === String(current)}, label));
  }
  return s;
}

// definitions is a two-column list of terms and values.
export function definitions(pairs) {
  const dl = el('dl', {class: 'defs'});
  for (const [term, value] of pairs) {
    dl.append(el('dt', null, term), el('dd', null, value));
  }
  return dl;
}
