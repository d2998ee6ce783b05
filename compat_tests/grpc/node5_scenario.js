// RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) against rmqd's gRPC endpoint.
// Run by test_grpc_node.py with NODE_PATH pointing at the installed client; prints JSON lines.
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult, FilterExpression } = require('rocketmq-client-nodejs');
const endpoints = process.env.ENDPOINT;
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const logger = { info(...a) { if (process.env.DBG) process.stderr.write(a.map(String).join(" ") + "\n"); }, debug(...a) { if (process.env.DBG) process.stderr.write("D " + a.map(String).join(" ") + "\n"); }, warn(...a) { process.stderr.write("W " + a.map(String).join(" ") + "\n"); }, error(...a) { process.stderr.write(a.map(String).join(' ') + '\n'); } };
const view = (m) => ({ id: m.messageId, topic: m.topic, body: m.body.toString(), tag: m.tag || null,
  keys: [...m.keys].sort(), props: Object.fromEntries(m.properties), group: m.messageGroup || null,
  attempt: m.deliveryAttempt });

async function receiveAll(consumer, want, invisible, timeoutMs, ack = true) {
  const got = []; const end = Date.now() + timeoutMs;
  while (got.length < want && Date.now() < end) {
    for (const m of await consumer.receive(16, invisible)) {
      got.push(m);
      if (ack) await consumer.ack(m);
    }
  }
  return got;
}

async function main() {
  const producer = new Producer({ endpoints, namespace: '', logger, topics: ['N5Topic', 'N5Push'] });
  await producer.startup();
  const sent = {};
  const specs = [{ tag: 'TagA', keys: ['nk1', 'nk2'] }, { tag: 'TagB' }, { messageGroup: 'grp-1' }];
  for (let i = 0; i < specs.length; i++) {
    const r = await producer.send({ topic: 'N5Topic', body: Buffer.from(`node-${i}`),
      properties: new Map([['source', 'node']]), ...specs[i] });
    sent[r.messageId] = i;
  }
  emit({ op: 'sent', ids: sent });

  const simple = new SimpleConsumer({ endpoints, namespace: '', logger, consumerGroup: 'N5Simple',
    subscriptions: new Map([['N5Topic', FilterExpression.SUB_ALL]]), awaitDuration: 2000 });
  await simple.startup();
  for (const m of await receiveAll(simple, 3, 10000, 20000)) emit({ op: 'got', ...view(m) });

  // un-acked: back after the invisible time with attempt + 1; then ack
  const again = await producer.send({ topic: 'N5Topic', body: Buffer.from('again'), tag: 'TagR' });
  const first = await receiveAll(simple, 1, 1000, 10000, false);
  const second = await receiveAll(simple, 1, 10000, 10000, false);
  emit({ op: 'redelivered', id: again.messageId, first: first.map(view), second: second.map(view) });
  if (second.length) await simple.ack(second[0]);
  await simple.shutdown();

  // push consumer: QueryAssignment + receive stream
  const seen = new Set();
  const push = new PushConsumer({ endpoints, namespace: '', logger, consumerGroup: 'N5PushGroup',
    subscriptions: new Map([['N5Push', FilterExpression.SUB_ALL]]),
    messageListener: { consume(m) { seen.add(m.body.toString()); return ConsumeResult.SUCCESS; } } });
  await push.startup();
  for (let i = 0; i < 5; i++) await producer.send({ topic: 'N5Push', body: Buffer.from(`push-${i}`) });
  const end = Date.now() + 30000;
  while (seen.size < 5 && Date.now() < end) await sleep(100);
  emit({ op: 'pushed', bodies: [...seen].sort() });
  await push.shutdown();
  await producer.shutdown();
}

main().then(() => process.exit(0), (e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
