// History: the cluster's audit trail, newest first: who changed what
// (failovers, recoveries, moves, ACLs, the controller group).

import {el} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'History',
  mount(root, ctx) {
    const filter = el('input', {type: 'search', class: 'wide', placeholder: 'Filter by action, topic, requester or note', 'aria-label': 'Filter history'});
    const total = el('span', {class: 'muted'});
    let last = [];
    const list = table({
      sort: ['time', 'desc'],
      empty: 'No events.',
      columns: [
        {key: 'time', title: 'When', render: (e) => el('span', {class: 'nowrap', title: fmt.ago(e.time)}, fmt.time(e.time))},
        {key: 'action', title: 'Action', render: (e) => el('code', null, e.action)},
        {key: 'requester', title: 'Who', render: (e) => e.requester || '—'},
        {key: 'where', title: 'Partition', value: (e) => where(e), render: (e) => where(e) || el('span', {class: 'muted'}, 'cluster')},
        {key: 'detail', title: 'Detail', class: 'wrap', sortable: false, render: eventDetail},
      ],
    });
    const apply = () => {
      const q = filter.value.trim().toLowerCase();
      list.setRows(q ? last.filter((e) => [e.action, e.requester, where(e), e.note, e.error].some((s) => (s || '').toLowerCase().includes(q))) : last);
    };
    filter.addEventListener('input', apply);
    root.append(el('div', {class: 'toolbar'}, filter, total), el('section', {class: 'panel'}, list.el));
    return {
      async refresh() {
        const r = await ctx.api.get('history');
        if (!ctx.live()) return;
        last = r.events;
        total.textContent = r.total > r.events.length ? `the newest ${fmt.count(r.events.length)} of ${fmt.count(r.total)} events` : '';
        apply();
      },
    };
  },
};

function where(e) {
  return e.topic ? e.topic + '/' + e.partition : '';
}

// eventDetail says what an event changed: leadership, the active set,
// the replicas, records lost, and its note or error.
export function eventDetail(e) {
  const parts = [];
  const list = (xs) => '[' + (xs || []).join(', ') + ']';
  if (e.oldLeader !== e.newLeader && (e.oldLeader || e.newLeader)) parts.push(`leader ${e.oldLeader || 'none'} → ${e.newLeader || 'none'}`);
  if (e.newEpoch && e.oldEpoch !== e.newEpoch) parts.push(`epoch ${e.oldEpoch} → ${e.newEpoch}`);
  if ((e.oldActive || []).join() !== (e.newActive || []).join()) parts.push(`active ${list(e.oldActive)} → ${list(e.newActive)}`);
  if ((e.oldReplicas || []).length || (e.newReplicas || []).length) parts.push(`replicas ${list(e.oldReplicas)} → ${list(e.newReplicas)}`);
  if (e.lostFromOffset !== null && e.lostFromOffset !== undefined) parts.push(`records from offset ${fmt.count(e.lostFromOffset)} lost`);
  if (e.note) parts.push(e.note);
  return el('span', null, parts.join('; ') || '—', e.error ? el('span', {class: 'error'}, ' ' + e.error) : null);
}
