// Messages: browse a topic's records from the earliest, the latest, an
// offset or a time; search them by key, value or header; show values as
// JSON, text or hex; download what is shown; follow a live tail; and
// produce a record.

import {button, el, errorBox, field, messageOf, note, section, select} from '../dom.js';
import * as fmt from '../format.js';
import {recordCells, valueModes} from '../records.js';

// The live tail keeps the newest TAIL_CAP records and drops older ones
// from the page (docs/console.md, "Live tail").
const TAIL_CAP = 1000;

export default {
  title: 'Messages',
  mount(root, ctx) {
    const state = {topic: ctx.query.topic || '', records: [], next: null, mode: 'auto', tail: null};

    // The query form.
    const topicSel = el('select', {id: 'msg-topic', 'aria-label': 'Topic'});
    const partition = el('input', {type: 'number', min: 0, class: 'narrow', placeholder: 'all', id: 'msg-partition', value: ctx.query.partition || ''});
    const start = select({id: 'msg-start'}, [['earliest', 'Earliest'], ['latest', 'Latest'], ['offset', 'Offset'], ['time', 'Time']], 'earliest');
    const offset = el('input', {type: 'number', min: 0, class: 'narrow', id: 'msg-offset', hidden: true, 'aria-label': 'Start offset'});
    const when = el('input', {type: 'datetime-local', step: 1, id: 'msg-time', hidden: true, 'aria-label': 'Start time'});
    const limit = select({id: 'msg-limit'}, ['20', '50', '100', '200', '500'], '50');
    const q = el('input', {type: 'search', class: 'wide', id: 'msg-q', placeholder: 'Text in a key, value or header'});
    const inKey = el('input', {type: 'checkbox', checked: true, id: 'msg-in-key'});
    const inValue = el('input', {type: 'checkbox', checked: true, id: 'msg-in-value'});
    const inHeaders = el('input', {type: 'checkbox', checked: true, id: 'msg-in-headers'});
    start.addEventListener('change', () => {
      offset.hidden = start.value !== 'offset';
      when.hidden = start.value !== 'time';
    });
    topicSel.addEventListener('change', () => {
      state.topic = topicSel.value;
      history.replaceState(null, '', '#/messages?topic=' + encodeURIComponent(state.topic));
      stopTail();
      browse();
    });

    const form = el('form', {class: 'inline', id: 'msg-form'},
      field('Topic', topicSel),
      field('Partition', partition),
      field('Start at', el('span', {class: 'toolbar-inline'}, start, ' ', offset, when)),
      field('Limit', limit),
      field('Search', q),
      el('fieldset', {class: 'field'}, el('span', {class: 'field-label'}, 'Look in'),
        el('span', null, el('label', null, inKey, ' key '), el('label', null, inValue, ' value '), el('label', null, inHeaders, ' headers'))),
      el('button', {type: 'submit', class: 'primary'}, 'Show'),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      browse();
    });

    // Results.
    const resultsInfo = el('div', {class: 'muted note', id: 'msg-info'});
    const resultsBody = el('tbody');
    const searchOn = button('Search on', () => browse(state.next), {hidden: true, id: 'msg-search-on'});
    const download = button('Download JSON', async () => saveJSON(state.topic + '-records.json', state.records), {id: 'msg-download'});
    const modes = valueModes((m) => {
      state.mode = m;
      renderResults();
      renderTail();
    });
    const resultsError = el('div');
    const results = section('Records',
      el('div', {class: 'toolbar'}, el('span', {class: 'muted'}, 'Show values as'), modes.el, download, searchOn),
      resultsError, resultsInfo,
      el('div', {class: 'table-wrap'}, el('table', {class: 'data records', id: 'msg-results'}, recordHead(), resultsBody)));

    // Live tail.
    const tailState = el('span', {class: 'tail-state muted', id: 'tail-state'}, 'Not following.');
    const tailBody = el('tbody');
    const tailButton = el('button', {type: 'button', id: 'tail-toggle'}, 'Start live tail');
    tailButton.addEventListener('click', () => (state.tail ? stopTail('Stopped.') : startTail()));
    const tail = section('Live tail',
      el('div', {class: 'toolbar'}, tailButton, tailState),
      note('New records as they are written, newest first; the page keeps the last ', fmt.count(TAIL_CAP), '.'),
      el('div', {class: 'table-wrap'}, el('table', {class: 'data records', id: 'tail-records'}, recordHead(), tailBody)));
    const tailRecords = [];

    // Produce.
    const pPartition = el('input', {type: 'number', min: 0, class: 'narrow', id: 'produce-partition', placeholder: 'by key'});
    const pKey = el('input', {type: 'text', id: 'produce-key', class: 'wide'});
    const pValue = el('textarea', {id: 'produce-value', rows: 4});
    const pHeaders = el('textarea', {id: 'produce-headers', rows: 2, placeholder: 'name=value, one a line'});
    const produceResult = el('div', {role: 'status'});
    const produceForm = el('form', {id: 'produce-form'},
      el('div', {class: 'inline'}, field('Partition', pPartition), field('Key', pKey, 'empty: none')),
      field('Value', pValue),
      field('Headers', pHeaders),
      el('div', {class: 'actions'}, el('button', {type: 'submit', class: 'primary'}, 'Produce'), produceResult));
    produceForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      produceResult.replaceChildren();
      const body = {value: pValue.value};
      if (pPartition.value !== '') body.partition = Number(pPartition.value);
      if (pKey.value !== '') body.key = pKey.value;
      const headers = parseHeaders(pHeaders.value);
      if (headers.error) {
        produceResult.replaceChildren(errorBox(headers.error));
        return;
      }
      if (headers.list.length) body.headers = headers.list;
      const submit = produceForm.querySelector('button[type=submit]');
      submit.disabled = true;
      try {
        const r = await ctx.api.post('topics/' + encodeURIComponent(state.topic) + '/produce', body);
        produceResult.replaceChildren(el('span', {class: 'success'}, `Written to partition ${r.partition} at offset ${fmt.count(r.offset)}.`));
      } catch (err) {
        produceResult.replaceChildren(errorBox(err));
      } finally {
        submit.disabled = false;
      }
    });

    root.append(el('section', {class: 'panel'}, form), results, tail, section('Produce a record', produceForm));

    async function browse(from) {
      if (!state.topic) return;
      resultsError.replaceChildren();
      // "Search on" names each partition to go on with, and only those.
      const query = {limit: limit.value, partition: from ? '' : partition.value, start: startParam(from)};
      if (q.value !== '') {
        query.q = q.value;
        query.in = [inKey.checked && 'key', inValue.checked && 'value', inHeaders.checked && 'headers'].filter(Boolean).join(',');
      }
      resultsInfo.textContent = 'Loading…';
      try {
        const r = await ctx.api.get('topics/' + encodeURIComponent(state.topic) + '/messages', query);
        if (!ctx.live()) return;
        state.records = r.records || [];
        state.next = r.done || !r.next || !Object.keys(r.next).length ? null : r.next;
        searchOn.hidden = !state.next || q.value === '';
        resultsInfo.textContent = info(r, q.value);
        renderResults();
      } catch (err) {
        resultsInfo.textContent = '';
        resultsError.replaceChildren(errorBox(err));
      }
    }

    function startParam(from) {
      if (from) return 'offsets:' + Object.entries(from).map(([p, o]) => p + '=' + o).join(',');
      switch (start.value) {
        case 'offset': return 'offset:' + (offset.value || '0');
        case 'time': return 'time:' + (when.value ? new Date(when.value).getTime() : Date.now());
        default: return start.value;
      }
    }

    function renderResults() {
      resultsBody.replaceChildren(...(state.records.length
        ? state.records.map((r) => recordRow(r, state.mode))
        : [el('tr', null, el('td', {class: 'empty', colspan: 6}, 'No records.'))]));
    }

    function renderTail() {
      tailBody.replaceChildren(...tailRecords.map((r) => recordRow(r, state.mode)));
    }

    function startTail() {
      if (!state.topic) return;
      const ctl = new AbortController();
      state.tail = ctl;
      tailButton.textContent = 'Stop live tail';
      tailState.className = 'tail-state muted';
      const what = state.topic + (partition.value !== '' ? ' partition ' + partition.value : '');
      tailState.textContent = 'Connecting…';
      const onOpen = () => {
        tailState.className = 'tail-state live open';
        tailState.textContent = 'Following ' + what + ': new records appear at the top.';
      };
      const onEvent = (name, data) => {
        if (ctl.signal.aborted) return;
        if (name === 'record') {
          const r = JSON.parse(data);
          tailRecords.unshift(r);
          tailBody.prepend(recordRow(r, state.mode));
          while (tailRecords.length > TAIL_CAP) {
            tailRecords.pop();
            tailBody.lastElementChild.remove();
          }
        } else if (name === 'error') {
          stopTail(errorText(data));
        }
      };
      ctx.api.events('topics/' + encodeURIComponent(state.topic) + '/tail', {partition: partition.value}, {onOpen, onEvent, signal: ctl.signal}).then(
        () => { if (state.tail === ctl) stopTail('The node ended the stream. Start it again to resume.'); },
        (err) => { if (state.tail === ctl) stopTail(messageOf(err)); },
      );
    }

    function stopTail(why) {
      if (!state.tail) return;
      state.tail.abort();
      state.tail = null;
      tailButton.textContent = 'Start live tail';
      tailState.className = 'tail-state muted';
      tailState.textContent = why || 'Stopped.';
    }

    return {
      auto: false,
      async refresh() {
        const r = await ctx.api.get('topics');
        if (!ctx.live()) return;
        const names = (r.topics || []).filter((t) => !t.internal).map((t) => t.name).sort();
        if (!state.topic && names.length) state.topic = names[0];
        if (state.topic && !names.includes(state.topic)) names.unshift(state.topic);
        topicSel.replaceChildren(...names.map((n) => el('option', {value: n, selected: n === state.topic}, n)));
        if (!names.length) {
          resultsInfo.textContent = 'No topics to read.';
          return;
        }
        await browse();
      },
      unmount() {
        stopTail();
      },
    };
  },
};

function recordHead() {
  return el('thead', null, el('tr', null,
    el('th', {class: 'num'}, 'Partition'), el('th', {class: 'num'}, 'Offset'), el('th', null, 'Time'),
    el('th', null, 'Key'), el('th', null, 'Value'), el('th', null, 'Headers')));
}

function recordRow(r, mode) {
  return el('tr', null, recordCells(r, mode));
}

function info(r, q) {
  const n = (r.records || []).length;
  let s = fmt.count(n) + (n === 1 ? ' record' : ' records');
  if (q) {
    s += ` matching “${q}” among ${fmt.count(r.scanned)} scanned`;
    s += r.done ? '; the search reached the end.' : '; the search stopped at its bound: “Search on” continues from there.';
  }
  return s;
}

function errorText(data) {
  try {
    const e = JSON.parse(data);
    return e.error || data;
  } catch {
    return data;
  }
}

// parseHeaders reads "name=value" lines into [{key, value}].
export function parseHeaders(text) {
  const list = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) return {error: `header “${line}”: write it as name=value`};
    list.push({key: line.slice(0, eq), value: line.slice(eq + 1)});
  }
  return {list};
}

// saveJSON offers v to the reader as a file.
function saveJSON(name, v) {
  const blob = new Blob([JSON.stringify(v, null, 2) + '\n'], {type: 'application/json'});
  const a = el('a', {href: URL.createObjectURL(blob), download: name});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}
