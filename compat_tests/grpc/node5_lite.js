// RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8): Lite Mode and priority against rmqd.
// Run by test_lite_node.py (NODE_PATH -> the installed client); prints JSON lines.
const { Producer, LitePushConsumerImpl, OffsetOption, ConsumeResult } = require('rocketmq-client-nodejs');
const endpoints = process.env.ENDPOINT;
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const logger = { info() {}, debug() {}, warn(...a) { process.stderr.write('W ' + a.map(String).join(' ') + '\n'); },
  error(...a) { process.stderr.write(a.map(String).join(' ') + '\n'); } };

function consumer(group, got) {
  return new LitePushConsumerImpl({ endpoints, namespace: '', logger, consumerGroup: group, bindTopic: 'NL',
    messageListener: { consume(m) { got.push([m.liteTopic, m.body.toString()]); return ConsumeResult.SUCCESS; } } });
}

async function waitFor(pred, ms) {
  const end = Date.now() + ms;
  while (!pred() && Date.now() < end) await sleep(50);
  return pred();
}

async function main() {
  const producer = new Producer({ endpoints, namespace: '', logger, topics: ['NL', 'NP'] });
  await producer.startup();
  // priority: sent with the field, reported back with it
  const r = await producer.send({ topic: 'NP', body: Buffer.from('p'), priority: 5 });
  emit({ op: 'priority', id: r.messageId });
  let refused = null;
  try {
    await producer.send({ topic: 'NL', body: Buffer.from('x'), priority: 1 });
  } catch (e) { refused = { code: e.code === undefined ? null : e.code, error: String(e.message) }; }
  emit({ op: 'priority_on_lite', ...refused });

  // OffsetOption MIN: a subscriber starts at the first message; Exclusive: a second subscriber evicts it
  for (let i = 0; i < 3; i++) await producer.send({ topic: 'NL', body: Buffer.from(`room-${i}`), liteTopic: 'room' });
  const a = []; const b = [];
  const ca = consumer('NXG', a); await ca.startup();
  await ca.subscribeLite('room', OffsetOption.MIN_OFFSET);
  await waitFor(() => a.length >= 3, 15000);
  const cb = consumer('NXG', b); await cb.startup();
  await cb.subscribeLite('room');
  await sleep(300);               // the eviction's NotifyUnsubscribeLite reaches the client
  for (let i = 3; i < 6; i++) await producer.send({ topic: 'NL', body: Buffer.from(`room-${i}`), liteTopic: 'room' });
  await waitFor(() => b.length >= 3, 15000);
  await sleep(500);
  emit({ op: 'exclusive', a, b, aSet: [...ca.getLiteTopicSet()], bSet: [...cb.getLiteTopicSet()] });

  // the broker-wide subscription limit (maxLiteSubscriptionCount=3 here): the client gets 42902
  let quota = null;
  try { for (const n of ['q1', 'q2', 'q3']) await cb.subscribeLite(n); } catch (e) { quota = e.code; }
  emit({ op: 'quota', code: quota });
  await ca.shutdown(); await cb.shutdown(); await producer.shutdown();
}

main().then(() => process.exit(0), (e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
