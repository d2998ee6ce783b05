// RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) running differential scenarios against one endpoint;
// run by test_grpc5_node.py (NODE_PATH -> the installed client). Env: ENDPOINT, LITE_ENDPOINT, SUFFIX, SECTIONS.
// Every section runs at once on its own topics and groups (N5D<Kind><suffix>, made with mqadmin beforehand) and
// prints JSON lines {op, section, ...}; message ids are reported as the label of the send that made them.
const { Producer, SimpleConsumer, PushConsumer, LitePushConsumerImpl, ConsumeResult, FilterExpression } =
  require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const endpoints = process.env.ENDPOINT;
const liteEndpoints = process.env.LITE_ENDPOINT;
const suffix = process.env.SUFFIX || '';
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const logger = { info() {}, debug() {}, warn() {}, error(...a) { if (process.env.DBG) process.stderr.write(a.join(' ') + '\n'); } };
const labels = new Map();
const name = (kind) => `N5D${kind}${suffix}`;

const codeOf = (e) => (e && e.code !== undefined ? e.code : (e && e.name) || 'Error');
const textOf = (e) => String(e && e.message || e).replace(/request-id[=:] ?[0-9a-f-]+/g, 'request-id=<id>');
const view = (m) => ({ id: labels.get(m.messageId) || '<other>', body: m.body.toString(), tag: m.tag || null,
  keys: [...m.keys].sort(), props: Object.fromEntries([...m.properties].sort()), group: m.messageGroup || null,
  lite: m.liteTopic || null, priority: m.priority === undefined ? null : m.priority,
  delivery: Boolean(m.deliveryTimestamp), attempt: m.deliveryAttempt });

async function producer(topic, endpoint = endpoints, checker = undefined) {
  const p = new Producer({ endpoints: endpoint, namespace: '', logger, topics: [topic], checker });
  await p.startup();
  return p;
}

async function send(section, p, label, message, tx = undefined) {
  try {
    const r = tx ? await p.send(message, tx) : await p.send(message);
    labels.set(r.messageId, label);
    emit({ op: 'sent', section, label, recall: Boolean(r.recallHandle) });
    return r;
  } catch (e) {
    emit({ op: 'refused', section, label, code: codeOf(e), error: textOf(e) });
    return null;
  }
}

async function simple(group, topic) {
  const c = new SimpleConsumer({ endpoints, namespace: '', logger, consumerGroup: group,
    subscriptions: new Map([[topic, FilterExpression.SUB_ALL]]), awaitDuration: 3000 });
  await c.startup();
  return c;
}

async function receive(c, want, invisibleMs, timeoutMs, ack = true) {
  const got = []; const end = Date.now() + timeoutMs;
  while (got.length < want && Date.now() < end) {
    for (const m of await c.receive(16, invisibleMs)) {
      got.push(m);
      if (ack) await c.ack(m);
    }
  }
  return got;
}

const got = (section, op, msgs) => emit({ op, section, messages: msgs.map(view) });
const body = (b) => Buffer.from(b);

const sections = {
  async normal() {
    const t = name('Normal');
    const p = await producer(t);
    await send('normal', p, 'n0', { topic: t, body: body('n0'), tag: 'TagA', keys: ['k1', 'k2'],
      properties: new Map([['color', 'red']]) });
    await send('normal', p, 'n1', { topic: t, body: body('n1') });
    await send('normal', p, 'fifo-on-normal', { topic: t, body: body('x'), messageGroup: 'g' });
    await send('normal', p, 'priority-on-normal', { topic: t, body: body('x'), priority: 3 });
    const c = await simple(name('NormalG'), t);
    got('normal', 'got', await receive(c, 2, 15000, 30000));
  },
  async fifo() {
    const t = name('Fifo');
    const p = await producer(t);
    for (let i = 0; i < 3; i++) {
      for (const g of [0, 1]) {
        await send('fifo', p, `g${g}-${i}`, { topic: t, body: body(`g${g}-${i}`), messageGroup: `order-${g}` });
      }
    }
    const c = await simple(name('FifoG'), t);
    got('fifo', 'got', await receive(c, 6, 15000, 40000));
  },
  async delay() {
    const t = name('Delay');
    const c = await simple(name('DelayG'), t);
    const p = await producer(t);
    const sentAt = Date.now();
    await send('delay', p, 'later', { topic: t, body: body('later'), delay: 3000 });
    got('delay', 'got', await receive(c, 1, 15000, 30000));
    emit({ op: 'age', section: 'delay', early: Date.now() - sentAt < 2500 });
  },
  async tx() {
    const t = name('Tx');
    const checked = [];
    const checker = { async check(m) {
      const label = labels.get(m.messageId) || '<other>';
      checked.push(label);
      return label === 'orphan' ? TransactionResolution.COMMIT : TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED;
    } };
    const p = await producer(t, endpoints, checker);
    for (const what of ['commit', 'rollback', 'orphan']) {
      const tx = p.beginTransaction();
      const r = await p.send({ topic: t, body: body(what), tag: 'tx' }, tx);
      labels.set(r.messageId, what);
      if (what === 'commit') await tx.commit();
      else if (what === 'rollback') await tx.rollback();
    }
    const c = await simple(name('TxG'), t);
    const msgs = await receive(c, 2, 15000, 40000);
    msgs.push(...await receive(c, 1, 15000, 3000));
    got('tx', 'got', msgs);
    emit({ op: 'checked', section: 'tx', orphan: checked.includes('orphan') });
  },
  async change() {
    const t = name('Change');
    const p = await producer(t);
    await send('change', p, 'extend', { topic: t, body: body('extend') });
    const c = await simple(name('ChangeG'), t);
    const first = await receive(c, 1, 3000, 20000, false);        // 3 s: room to change it in time
    got('change', 'first', first);
    await c.changeInvisibleDuration(first[0], 6000);
    const changed = Date.now();
    const again = await receive(c, 1, 15000, 25000, false);
    got('change', 'again', again);
    emit({ op: 'after', section: 'change', early: Date.now() - changed < 5500 });
    for (const m of again) await c.ack(m);
  },
  async push() {
    const t = name('Push');
    const seen = [];
    const c = new PushConsumer({ endpoints, namespace: '', logger, consumerGroup: name('PushG'),
      subscriptions: new Map([[t, FilterExpression.SUB_ALL]]),
      messageListener: { consume(m) {
        seen.push(m);
        return m.body.toString() === 'fail-once' && m.deliveryAttempt === 1 ? ConsumeResult.FAILURE
          : ConsumeResult.SUCCESS;
      } } });
    await c.startup();
    const p = await producer(t);
    for (let i = 0; i < 3; i++) await send('push', p, `push${i}`, { topic: t, body: body(`push${i}`) });
    await send('push', p, 'fail-once', { topic: t, body: body('fail-once') });
    const end = Date.now() + 40000;
    while (seen.length < 5 && Date.now() < end) await sleep(100);
    await sleep(500);
    got('push', 'got', seen);
  },
  async dlq() {
    const t = name('Dlq'); const g = name('DlqG');
    const p = await producer(t);
    await send('dlq', p, 'poison', { topic: t, body: body('poison') });
    const c = await simple(g, t);
    const attempts = [];
    for (let i = 0; i < 2; i++) attempts.push(...await receive(c, 1, 1000, 20000, false));
    got('dlq', 'attempts', attempts);
    got('dlq', 'after', await receive(c, 1, 1000, 5000, false));
    const r = await simple(name('DlqReader'), `%DLQ%${g}`);
    // one entry per message id: forwarding to the DLQ is at-least-once on both servers (a loaded Java 5.5
    // broker's revive once put the poison message there twice)
    const seenIds = new Set();
    got('dlq', 'dlq', (await receive(r, 1, 15000, 20000)).filter((m) => !seenIds.has(m.messageId) && seenIds.add(m.messageId)));
  },
  async recall() {
    const t = name('Recall');
    const p = await producer(t);
    const at = Date.now() + 8000;                // room for a loaded machine before the recall
    await send('recall', p, 'keep', { topic: t, body: body('keep'), deliveryTimestamp: new Date(at) });
    const drop = await send('recall', p, 'drop', { topic: t, body: body('drop'), deliveryTimestamp: new Date(at) });
    for (const [attempt, handle] of [['first', drop.recallHandle], ['garbage', 'garbage']]) {
      try {
        const r = await p.recallMessage(t, handle);
        emit({ op: 'recalled', section: 'recall', attempt, id: labels.get(r.messageId) || '<other>' });
      } catch (e) {
        emit({ op: 'recall-refused', section: 'recall', attempt, code: codeOf(e), error: textOf(e) });
      }
    }
    const c = await simple(name('RecallG'), t);
    got('recall', 'got', await receive(c, 2, 15000, 20000));
  },
  async priority() {
    const t = name('Prio');
    const p = await producer(t);
    for (let i = 0; i < 4; i++) await send('priority', p, `low${i}`, { topic: t, body: body(`low${i}`), priority: 0 });
    for (let i = 0; i < 2; i++) await send('priority', p, `high${i}`, { topic: t, body: body(`high${i}`), priority: 7 });
    const c = await simple(name('PrioG'), t);
    got('priority', 'got', await receive(c, 6, 15000, 30000));
  },
  async lite() {
    const t = name('Lite');
    const seen = [];
    const c = new LitePushConsumerImpl({ endpoints: liteEndpoints, namespace: '', logger, consumerGroup: name('LiteG'),
      bindTopic: t, messageListener: { consume(m) { seen.push(m); return ConsumeResult.SUCCESS; } } });
    await c.startup();
    await c.subscribeLite('chat-1');
    const p = await producer(t, liteEndpoints);
    for (let i = 0; i < 3; i++) await send('lite', p, `c1-${i}`, { topic: t, body: body(`c1-${i}`), liteTopic: 'chat-1' });
    await send('lite', p, 'c2-0', { topic: t, body: body('c2-0'), liteTopic: 'chat-2' });
    await send('lite', p, 'no-lite-on-lite', { topic: t, body: body('x') });
    const end = Date.now() + 30000;
    while (seen.length < 3 && Date.now() < end) await sleep(100);
    await sleep(1000);
    got('lite', 'got', seen);
  },
  async litenew() {
    // a LitePushConsumer of a group nobody made: what the application sees
    const c = new LitePushConsumerImpl({ endpoints: liteEndpoints, namespace: '', logger,
      consumerGroup: name('LiteNewG'), bindTopic: name('Lite'), messageListener: { consume() { return ConsumeResult.SUCCESS; } } });
    try {
      await Promise.race([c.startup(), sleep(15000).then(() => { throw new Error('startup did not finish in 15 s'); })]);
      emit({ op: 'started', section: 'litenew' });
      await c.subscribeLite('agent-1');
      emit({ op: 'subscribed', section: 'litenew' });
    } catch (e) {
      emit({ op: 'error', section: 'litenew', code: codeOf(e), error: textOf(e) });
    }
  },
};

async function main() {
  await Promise.all(process.env.SECTIONS.split(',').map(async (section) => {
    const t0 = Date.now();
    try {
      await sections[section]();
    } catch (e) {
      emit({ op: 'error', section, code: codeOf(e), error: textOf(e) });
    }
    emit({ op: 'done', section, ms: Date.now() - t0 });
  }));
}

main().then(() => process.exit(0), (e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
