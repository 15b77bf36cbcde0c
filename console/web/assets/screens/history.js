// History: the cluster's audit trail, newest first: who changed what
// (topics, ACLs, failovers, moves, offset resets).

import {el} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'History',
  mount(root, ctx) {
    const filter = el('input', {type: 'search', class: 'wide', placeholder: 'Filter by kind, requester or detail', 'aria-label': 'Filter history'});
    let last = [];
    const list = table({
      sort: ['time', 'desc'],
      empty: 'No events.',
      columns: [
        {key: 'time', title: 'When', render: (e) => el('span', {class: 'nowrap', title: fmt.ago(e.time)}, fmt.time(e.time))},
        {key: 'kind', title: 'Event', render: (e) => el('code', null, e.kind)},
        {key: 'requester', title: 'Who', render: (e) => e.requester || '—'},
        {key: 'detail', title: 'Detail', class: 'wrap', render: (e) => e.detail || '—'},
      ],
    });
    const apply = () => {
      const q = filter.value.trim().toLowerCase();
      list.setRows(q ? last.filter((e) => [e.kind, e.requester, e.detail].some((s) => (s || '').toLowerCase().includes(q))) : last);
    };
    filter.addEventListener('input', apply);
    root.append(el('div', {class: 'toolbar'}, filter), el('section', {class: 'panel'}, list.el));
    return {
      async refresh() {
        const r = await ctx.api.get('history');
        if (!ctx.live()) return;
        last = r.events || [];
        apply();
      },
    };
  },
};
