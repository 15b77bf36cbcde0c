// Durable Streams: every stream the principal may describe, with its
// content type, size, records, live readers on this node, and whether it
// is closed (sealed).

import {badge, el, note} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'Durable Streams',
  mount(root, ctx) {
    const list = table({
      sort: ['path', 'asc'],
      empty: 'No streams (or none this principal may describe). PUT /v1/stream/PATH creates one.',
      columns: [
        {key: 'path', title: 'Path', render: (s) => el('code', null, s.path)},
        {key: 'content_type', title: 'Content type', render: (s) => s.content_type || '—'},
        {key: 'bytes', title: 'Size', numeric: true, render: (s) => fmt.bytes(s.bytes)},
        {key: 'records', title: 'Records', numeric: true, render: (s) => fmt.count(s.records)},
        {key: 'readers', title: 'Live readers here', numeric: true, render: (s) => fmt.count(s.readers)},
        {key: 'sealed', title: 'State', render: (s) => (s.sealed ? badge('closed', 'plain') : badge('open', 'ok'))},
      ],
    });
    root.append(el('section', {class: 'panel'}, list.el,
      note('Streams are served at /v1/stream/PATH on every node\'s HTTP address (docs/durable-streams.md). Live readers are those of this node only.')));
    return {
      async refresh() {
        const r = await ctx.api.get('streams');
        if (!ctx.live()) return;
        list.setRows(r.streams || []);
      },
    };
  },
};
