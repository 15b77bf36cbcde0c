// A sortable table. Columns say how to show a row's cell and what to
// sort it by; clicking a header sorts by it (again: the other way). The
// sort is kept when rows are replaced, so the five-second refresh of a
// list does not undo the reader's choice.

import {el} from './dom.js';

// table({columns, rows, sort, empty, rowKey, onRow}) returns {el,
// setRows}. Each column is {key, title, value(row), render(row),
// numeric, sortable, title attr}: value gives what the column sorts by
// (default row[key]), render what the cell shows (a string or a node;
// default the value). Numeric columns are right-aligned. sort is the
// initial [key, 'asc'|'desc'].
export function table({columns, rows = [], sort, empty = 'Nothing to show.', onRow, caption}) {
  let sortKey = sort ? sort[0] : null;
  let sortDir = sort ? sort[1] : 'asc';
  let current = rows;

  const thead = el('thead');
  const tbody = el('tbody');
  const tableEl = el('table', {class: 'data'}, caption ? el('caption', null, caption) : null, thead, tbody);
  const wrap = el('div', {class: 'table-wrap'}, tableEl);

  const valueOf = (c, row) => (c.value ? c.value(row) : row[c.key]);

  function header() {
    const tr = el('tr');
    for (const c of columns) {
      const sortable = c.sortable !== false;
      const th = el('th', {class: c.numeric ? 'num' : null, scope: 'col', title: c.help});
      if (sortable) {
        const active = c.key === sortKey;
        th.setAttribute('aria-sort', active ? (sortDir === 'asc' ? 'ascending' : 'descending') : 'none');
        th.append(el('button', {
          type: 'button',
          class: 'sort' + (active ? ' active ' + sortDir : ''),
          onclick: () => {
            if (sortKey === c.key) sortDir = sortDir === 'asc' ? 'desc' : 'asc';
            else {
              sortKey = c.key;
              sortDir = c.numeric ? 'desc' : 'asc';
            }
            header();
            body();
          },
        }, c.title));
      } else {
        th.append(c.title);
      }
      tr.append(th);
    }
    thead.replaceChildren(tr);
  }

  function sorted() {
    const c = columns.find((col) => col.key === sortKey);
    if (!c) return current;
    const dir = sortDir === 'asc' ? 1 : -1;
    return [...current].sort((a, b) => dir * compare(valueOf(c, a), valueOf(c, b)));
  }

  function body() {
    const trs = [];
    for (const row of sorted()) {
      const tr = el('tr');
      if (onRow) {
        tr.classList.add('clickable');
        tr.addEventListener('click', (ev) => {
          if (ev.target.closest('a, button, input, select')) return;
          onRow(row);
        });
      }
      for (const c of columns) {
        const shown = c.render ? c.render(row) : valueOf(c, row);
        tr.append(el('td', {class: c.numeric ? 'num' : c.class || null}, shown === null || shown === undefined ? '—' : shown));
      }
      trs.push(tr);
    }
    if (!trs.length) trs.push(el('tr', null, el('td', {class: 'empty', colspan: columns.length}, empty)));
    tbody.replaceChildren(...trs);
  }

  header();
  body();
  return {
    el: wrap,
    setRows(next) {
      current = next || [];
      body();
    },
  };
}

// compare orders numbers as numbers, strings naturally ("p2" before
// "p10"), and puts missing values last.
function compare(a, b) {
  const none = (v) => v === null || v === undefined || (typeof v === 'number' && Number.isNaN(v));
  if (none(a) || none(b)) return none(a) === none(b) ? 0 : none(a) ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return String(a).localeCompare(String(b), 'en', {numeric: true});
}
