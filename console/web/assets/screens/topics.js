// Topics: every topic the principal may describe, with its size, rate
// and the consumer groups that read it and their lag, from the console's
// survey of the cluster (docs/console.md, "The survey").

import {el, link, note} from '../dom.js';
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
          t.stream ? el('span', {class: 'muted'}, ' (stream ', t.stream, ')') : t.internal ? el('span', {class: 'muted'}, ' (internal)') : null)},
        {key: 'partitions', title: 'Partitions', numeric: true, render: (t) => fmt.count(t.partitions)},
        {key: 'replication_factor', title: 'Replication', numeric: true, render: (t) => fmt.count(t.replication_factor)},
        {key: 'bytes', title: 'Size', numeric: true, render: (t) => fmt.bytes(t.bytes)},
        {key: 'records_per_second', title: 'Rate', numeric: true, render: (t) => fmt.rate(t.records_per_second, 'rec')},
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
        age.textContent = r.surveyed ? 'From the survey of ' + fmt.ago(r.surveyed) + '; sizes and rates are every broker\'s latest samples.' : '';
      },
    };
  },
};

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
