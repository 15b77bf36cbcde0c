// Topics: every topic the principal may describe, with its size, rate
// and the consumer groups that read it and their lag, from the console's
// survey of the cluster (docs/console.md, "The survey").

import {badge, el, link, note} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'Topics',
  mount(root, ctx) {
    const showInternal = el('input', {type: 'checkbox', id: 'show-internal'});
    const filter = el('input', {type: 'search', placeholder: 'Filter by name', 'aria-label': 'Filter topics by name', class: 'wide'});
    const age = note();
    let last = [];
    const list = table({
      sort: ['name', 'asc'],
      empty: 'No topics (or none this principal may describe).',
      onRow: (t) => { location.hash = '#/topics/' + encodeURIComponent(t.name); },
      columns: [
        {key: 'name', title: 'Topic', render: (t) => el('span', null, link('#/topics/' + encodeURIComponent(t.name), t.name),
          t.stream ? el('span', {class: 'muted'}, ' (stream ', t.stream, ')') : t.internal ? el('span', {class: 'muted'}, ' (internal)') : null,
          t.sealed ? [' ', badge('sealed', 'plain')] : null)},
        {key: 'partitions', title: 'Partitions', numeric: true, render: (t) => fmt.count(t.partitions)},
        {key: 'replicationFactor', title: 'Replication', numeric: true, render: (t) => fmt.count(t.replicationFactor)},
        {key: 'records', title: 'Records', numeric: true, render: (t) => el('span', null, fmt.count(t.records), unknown(t))},
        {key: 'bytes', title: 'Size', numeric: true, render: (t) => el('span', null, fmt.bytes(t.bytes), unknown(t))},
        {key: 'recordsPerSecond', title: 'Rate', numeric: true, render: (t) => fmt.rate(t.recordsPerSecond, 'rec')},
        {key: 'groups', title: 'Consumer groups (lag)', value: (t) => maxLag(t), sortable: true, render: groupsCell},
      ],
    });
    const apply = () => {
      const q = filter.value.trim();
      list.setRows(last.filter((t) => (showInternal.checked || !(t.internal || t.stream)) && (!q || t.name.includes(q))));
    };
    filter.addEventListener('input', apply);
    showInternal.addEventListener('change', apply);
    root.append(
      el('div', {class: 'toolbar'}, filter,
        el('label', {class: 'check'}, showInternal, ' Show internal topics and Durable Streams')),
      el('section', {class: 'panel'}, list.el, age),
    );
    return {
      async refresh() {
        const r = await ctx.api.get('topics');
        if (!ctx.live()) return;
        last = r.topics || [];
        apply();
        age.textContent = surveyNote(r);
      },
    };
  },
};

// surveyNote says how old the survey's answer is, and what did not
// answer in it.
export function surveyNote(r) {
  let s = 'From the survey of the cluster ' + fmt.ago(r.at) + ' (every 10 s).';
  if (r.unavailable && r.unavailable.length) s += ' Not answering: ' + r.unavailable.join('; ') + '.';
  return s;
}

function unknown(t) {
  return t.partitionsUnknown ? el('span', {class: 'muted', title: `${t.partitionsUnknown} partitions' leaders did not tell`}, ' +?') : null;
}

function maxLag(t) {
  return Math.max(-1, ...(t.groups || []).map((g) => g.lag));
}

function groupsCell(t) {
  const gs = t.groups || [];
  if (!gs.length) return el('span', {class: 'muted'}, 'none');
  return el('div', {class: 'lines'}, gs.map((g) =>
    el('div', null, link('#/groups/' + encodeURIComponent(g.group), g.group), ' ',
      el('span', {class: g.lag > 0 ? 'lag' : 'muted'}, 'lag ' + fmt.count(g.lag)))));
}
