// How a record's bytes are shown. The API sends each key, value and
// header value as {text, b64}: text when the bytes are UTF-8, base64
// always. A value is shown as pretty JSON when it parses, else as text,
// else as hex ("auto"), or as the reader chose. Everything enters the
// page as text nodes: a value holding markup is shown, never run.

import {el} from './dom.js';
import * as fmt from './format.js';

// SHOWN_MAX bounds what a cell shows of one value (hex and pretty JSON
// are longer than the bytes); the download holds all the node sent.
const SHOWN_MAX = 64 * 1024;

const MODES = [['auto', 'Auto'], ['json', 'JSON'], ['text', 'Text'], ['hex', 'Hex']];

// valueModes is the segmented control that picks how values are shown;
// onChange(mode) is called with the new mode.
export function valueModes(onChange, current = 'auto') {
  const wrap = el('span', {class: 'segmented', role: 'group', 'aria-label': 'Show values as'});
  for (const [mode, label] of MODES) {
    const b = el('button', {type: 'button', class: mode === current ? 'on' : null, 'aria-pressed': String(mode === current)}, label);
    b.addEventListener('click', () => {
      for (const other of wrap.children) {
        other.classList.toggle('on', other === b);
        other.setAttribute('aria-pressed', String(other === b));
      }
      onChange(mode);
    });
    wrap.append(b);
  }
  return {el: wrap};
}

// recordCells are the cells of one record: partition, offset, time,
// key, value and headers.
export function recordCells(r, mode) {
  return [
    el('td', {class: 'num'}, String(r.partition)),
    el('td', {class: 'num'}, fmt.count(r.offset)),
    el('td', {class: 'nowrap'}, fmt.time(r.timestamp)),
    el('td', {class: 'key-cell'}, r.key ? show(r.key, mode === 'hex' ? 'hex' : 'text') : el('span', {class: 'muted'}, 'none')),
    el('td', {class: 'value-cell'}, r.value ? el('pre', {class: 'record-value'}, show(r.value, mode)) : el('span', {class: 'muted'}, 'null')),
    el('td', {class: 'headers-cell'}, headersShown(r.headers, mode)),
  ];
}

function headersShown(headers, mode) {
  if (!headers.length) return el('span', {class: 'muted'}, '—');
  return el('div', {class: 'headers'}, headers.map((h) =>
    el('div', null, el('span', {class: 'muted'}, h.key + ': '), h.value ? show(h.value, mode === 'hex' ? 'hex' : 'text') : 'null')));
}

// show is the text that shows bytes b in mode: auto, json, text or hex.
// The node sends at most the first 64 KiB of each (b.cut says it left
// the rest out, b.size is the whole length): that is said after them.
export function show(b, mode) {
  const text = typeof b.text === 'string' ? b.text : null;
  const rest = b.cut ? `\n… cut: the node sends the first 64 KiB of ${fmt.bytes(b.size)}` : '';
  if (mode === 'hex' || text === null) return cut(hex(b.b64)) + rest;
  if (mode === 'text' || b.cut) return cut(text) + rest;
  const pretty = prettyJSON(text);
  return cut(pretty === null ? text : pretty);
}

function prettyJSON(text) {
  const t = text.trim();
  if (!t || !'{["'.includes(t[0])) return null;
  try {
    return JSON.stringify(JSON.parse(t), null, 2);
  } catch {
    return null;
  }
}

function cut(s) {
  if (s.length <= SHOWN_MAX) return s;
  return s.slice(0, SHOWN_MAX) + `\n… (${fmt.count(s.length - SHOWN_MAX)} more characters in the download)`;
}

// hex formats base64 bytes as hex, sixteen bytes a line.
export function hex(b64) {
  let bin;
  try {
    bin = atob(b64);
  } catch {
    return '(not base64)';
  }
  const lines = [];
  for (let i = 0; i < bin.length; i += 16) {
    const chunk = [];
    for (let j = i; j < Math.min(i + 16, bin.length); j++) chunk.push(bin.charCodeAt(j).toString(16).padStart(2, '0'));
    lines.push(chunk.join(' '));
  }
  return lines.join('\n');
}
