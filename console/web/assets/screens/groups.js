// Consumer groups: every group the principal may describe, its state,
// members and total lag, from the console's survey.

import {badge, el, link, note} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';
import {surveyNote} from './topics.js';

export default {
  title: 'Consumer groups',
  mount(root, ctx) {
    const age = note();
    const list = table({
      sort: ['lag', 'desc'],
      empty: 'No consumer groups (or none this principal may describe).',
      onRow: (g) => { location.hash = '#/groups/' + encodeURIComponent(g.name); },
      columns: [
        {key: 'name', title: 'Group', render: (g) => link('#/groups/' + encodeURIComponent(g.name), g.name)},
        {key: 'state', title: 'State', render: (g) => stateBadge(g.state)},
        {key: 'protocol', title: 'Protocol', render: (g) => g.protocol || '—'},
        {key: 'members', title: 'Members', numeric: true, render: (g) => fmt.count(g.members)},
        {key: 'lag', title: 'Total lag', numeric: true, render: (g) => (g.lag === null ? el('span', {class: 'muted'}, 'coordinator not answering') : fmt.count(g.lag))},
      ],
    });
    root.append(el('section', {class: 'panel'}, list.el, age));
    return {
      async refresh() {
        const r = await ctx.api.get('groups');
        if (!ctx.live()) return;
        list.setRows(r.groups);
        age.textContent = surveyNote(r);
      },
    };
  },
};

// stateBadge shows a group's state: Stable is calm, Empty plain, a
// rebalance a warning, Dead bad.
export function stateBadge(state) {
  const s = state || 'unknown';
  const tone = /^stable$/i.test(s) ? 'ok' : /^empty$/i.test(s) ? 'plain' : /dead/i.test(s) ? 'bad' : 'warn';
  return badge(s, tone);
}
