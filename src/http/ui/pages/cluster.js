// Cluster status: every member from `GET /gossip` (polled every 2 s) with its state, endpoints,
// checkpoints, lag behind the leader, epoch and when it was last heard from. The leader, lagging
// members and dead members are highlighted; a single node is labelled as such.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, table, badge, errorSlot, notice, stat } from '../ui.js';

const LEADER = /^(master|leader)$/i;
const POLL_MS = 2000;

export async function render(ctx) {
  const errors = errorSlot();
  const body = h('div', { id: 'cluster' }, h('p', { class: 'loading' }, 'Loading gossip…'));
  replace(ctx.main, pageHeader('Cluster', 'Members as this node hears them (GET /gossip)'), errors.el, body);
  let lastLeader = null;
  let leaderChanged = null;
  // When this page last saw each member alive: /gossip stamps every member with the reply's
  // own time, so it cannot tell how long ago a dead member was last heard.
  const seenAlive = new Map();

  ctx.poll(async () => {
    let g;
    try {
      g = await api.get('gossip', { signal: ctx.signal });
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET /gossip');
      return;
    }
    errors.clear();
    const members = g.members || [];
    const leader = members.find((m) => LEADER.test(m.state) && m.isAlive);
    const leaderId = leader?.instanceId || null;
    if (lastLeader && leaderId && leaderId !== lastLeader) leaderChanged = Date.now();
    if (leaderId) lastLeader = leaderId;
    for (const m of members) if (m.isAlive) seenAlive.set(m.instanceId, Date.now());
    replace(body, view(g, members, leader, leaderChanged, seenAlive));
  }, POLL_MS);
}

function isSelf(g, m) {
  return m.externalHttpIp === g.serverIp && Number(m.externalHttpPort) === Number(g.serverPort);
}

function view(g, members, leader, leaderChanged, seenAlive) {
  const leaderPos = leader ? Number(leader.writerCheckpoint) : null;
  const lagOf = (m) => (leaderPos === null || !m.isAlive ? null : Math.max(0, leaderPos - Number(m.writerCheckpoint)));
  const now = Date.now();
  const alive = members.filter((m) => m.isAlive).length;
  const dead = members.length - alive;
  const sorted = [...members].sort((a, b) => (LEADER.test(b.state) && b.isAlive) - (LEADER.test(a.state) && a.isAlive) || String(a.externalHttpPort).localeCompare(String(b.externalHttpPort)));

  const summary = h(
    'div',
    { class: 'grid stats' },
    stat('Members', f.num(members.length), members.length === 1 ? 'single node' : `${alive} alive, ${dead} dead`, { id: 'fig-members' }),
    stat('Leader', h('span', { class: 'addr' }, leader ? `${leader.externalHttpIp}:${leader.externalHttpPort}` : 'none'), leader ? `epoch ${leader.epochNumber}` : 'no live leader known', { id: 'fig-leader' }),
    stat('Leader writer checkpoint', leader ? f.num(leader.writerCheckpoint) : '–', null),
    stat('This node', h('span', { class: 'addr' }, `${g.serverIp}:${g.serverPort}`), null),
  );

  const rows = table(
    [
      {
        label: 'State',
        cell: (m) => [
          h('span', { title: `instance ${m.instanceId}` }, badge(m.isAlive ? m.state : `${m.state} (dead)`, m.isAlive ? undefined : 'bad')),
          isSelf(g, m) ? h('span', { class: 'badge neutral' }, 'this node') : null,
        ],
      },
      {
        label: 'Endpoints',
        cell: (m) => [
          h('div', { class: 'mono' }, `${m.externalHttpIp}:${m.externalHttpPort}`),
          h('div', { class: 'mono muted', title: 'replication endpoint' }, `repl ${m.internalTcpIp}:${m.internalTcpPort || m.internalSecureTcpPort || '–'}`),
        ],
      },
      { label: 'Alive', cell: (m) => (m.isAlive ? 'yes' : h('strong', 'no')) },
      { label: 'Writer', cell: (m) => f.num(m.writerCheckpoint), class: 'num' },
      { label: 'Chaser', cell: (m) => h('span', { title: `last commit ${m.lastCommitPosition}` }, f.num(m.chaserCheckpoint)), class: 'num' },
      {
        label: 'Lag',
        cell: (m) => {
          const lag = lagOf(m);
          if (lag === null) return '–';
          return lag > 0 ? h('span', { class: 'badge warn' }, f.bytes(lag)) : '0';
        },
        class: 'num',
      },
      { label: 'Epoch', cell: (m) => h('span', { title: `position ${m.epochPosition}, id ${m.epochId}` }, String(m.epochNumber)), class: 'num' },
      {
        label: 'Last heard',
        cell: (m) => {
          if (m.isAlive) return h('span', { title: `gossip time stamp ${m.timeStamp}` }, f.ago(m.timeStamp, now));
          const seen = seenAlive.get(m.instanceId);
          return h('span', { title: 'as seen by this page' }, seen ? `alive ${f.ago(new Date(seen).toISOString(), now)}` : 'not seen alive');
        },
      },
      { label: 'Priority', cell: (m) => f.num(m.nodePriority), class: 'num' },
    ],
    sorted,
    {
      id: 'members',
      rowClass: (m) => (!m.isAlive ? 'row-dead' : LEADER.test(m.state) ? 'row-leader' : (lagOf(m) || 0) > 0 ? 'row-lag' : null),
    },
  );

  return [
    members.length === 1 ? notice('Single node: this node is the whole cluster (cluster size 1).', 'info') : null,
    leaderChanged && now - leaderChanged < 120000 ? notice(`The leader changed ${f.ago(new Date(leaderChanged).toISOString(), now)}.`, 'warn') : null,
    !leader && members.length > 1 ? notice('No live leader: an election may be under way.', 'warn') : null,
    summary,
    card('Members', rows, h('p', { class: 'muted' }, 'Lag: bytes of the log a member has not written yet, against the leader’s writer checkpoint. Green: leader, amber: lagging, red: dead or unreachable.')),
  ];
}
