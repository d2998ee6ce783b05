// Command remoting2 runs one scenario of the official Go remoting client
// (github.com/apache/rocketmq-client-go/v2) against a name server, as an application does, and prints one JSON
// line per event ({"op": "send", ...}). It exits non-zero with the error on stderr when a step fails.
//
//	remoting2 -ns 127.0.0.1:9876 -topic T -group G [-broker ADDR] [-wait 60] SCENARIO
//
// Scenarios: sends, filter, orderly, delay, transaction, retry, pull, admin. The topic and the groups
// (G, and for filter also G-sql) are created beforehand with mqadmin, as an operator does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"rmqdcompat/internal/event"
)

// sendTimeout bounds a send (3 s by default): these machines are shared and busy.
const sendTimeout = 10 * time.Second

type args struct {
	ns, broker, topic, group string
	wait                     time.Duration
}

func (a args) deadline() time.Time { return time.Now().Add(a.wait) }

func main() {
	var a args
	var waitSec int
	flag.StringVar(&a.ns, "ns", "", "name server address")
	flag.StringVar(&a.broker, "broker", "", "broker address (admin scenario)")
	flag.StringVar(&a.topic, "topic", "", "topic, created beforehand")
	flag.StringVar(&a.group, "group", "", "consumer group, created beforehand")
	flag.IntVar(&waitSec, "wait", 60, "longest wait for the messages a consumer expects, seconds")
	flag.Parse()
	a.wait = time.Duration(waitSec) * time.Second
	if flag.NArg() != 1 || a.ns == "" || a.topic == "" || a.group == "" {
		fmt.Fprintln(os.Stderr, "usage: remoting2 -ns ADDR -topic T -group G [-broker ADDR] [-wait S] SCENARIO")
		os.Exit(2)
	}
	rlog.SetLogLevel(envOr("ROCKETMQ_GO_LOG_LEVEL", "warn"))
	scenarios := map[string]func(args){
		"sends": sends, "filter": filter, "orderly": orderly, "delay": delay, "transaction": transaction,
		"retry": retry, "pull": pull, "admin": adminCalls,
	}
	run, ok := scenarios[flag.Arg(0)]
	if !ok {
		event.Fail(fmt.Errorf("unknown scenario %q", flag.Arg(0)))
	}
	run(a)
	event.Emit("done", nil)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newProducer(a args, opts ...producer.Option) rocketmq.Producer {
	base := []producer.Option{producer.WithNameServer([]string{a.ns}), producer.WithGroupName(a.group + "-p"),
		producer.WithRetry(2), producer.WithInstanceName("p-" + a.group), producer.WithSendMsgTimeout(sendTimeout)}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	event.Check("new producer", err)
	event.Check("start producer", p.Start())
	return p
}

func sendResult(kind string, r *primitive.SendResult, err error) event.Fields {
	if err != nil {
		return event.Fields{"kind": kind, "error": err.Error()}
	}
	f := event.Fields{"kind": kind, "status": sendStatus(r.Status), "msgId": r.MsgID, "offsetMsgId": r.OffsetMsgID,
		"queueOffset": r.QueueOffset}
	if r.MessageQueue != nil {
		f["queue"] = r.MessageQueue.QueueId
		f["topic"] = r.MessageQueue.Topic
	}
	return f
}

// emitSend reports a send; a refused one ends the scenario at once (what should follow cannot).
func emitSend(f event.Fields) {
	event.Emit("send", f)
	if e, bad := f["error"]; bad {
		event.Fail(fmt.Errorf("send %v refused: %v", f["kind"], e))
	}
}

func sendStatus(s primitive.SendStatus) string {
	return [...]string{"SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE",
		"UNKNOWN_ERROR"}[s]
}

// message is what a consumer saw of one message: everything but the broker's ids, times and hosts, which the
// test masks anyway, is kept so that two brokers' deliveries can be compared property by property.
func message(m *primitive.MessageExt) event.Fields {
	f := event.Fields{"topic": m.Topic, "body": string(m.Body), "tags": m.GetTags(), "keys": m.GetKeys(),
		"props": m.GetProperties(), "reconsume": m.ReconsumeTimes, "queueOffset": m.QueueOffset,
		"msgId": m.MsgId, "bornTs": m.BornTimestamp, "storeTs": m.StoreTimestamp, "sysFlag": m.SysFlag,
		"recvTs": event.NowMs()}
	if m.Queue != nil {
		f["queue"] = m.Queue.QueueId
	}
	return f
}

type listener func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)

func newPushConsumer(a args, group, topic string, sel consumer.MessageSelector, f listener,
	opts ...consumer.Option) rocketmq.PushConsumer {
	base := []consumer.Option{consumer.WithNameServer([]string{a.ns}), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumerModel(consumer.Clustering)}
	c, err := rocketmq.NewPushConsumer(append(base, opts...)...)
	event.Check("new push consumer "+group, err)
	event.Check("subscribe "+group, c.Subscribe(topic, sel, f))
	event.Check("start push consumer "+group, c.Start())
	return c
}

func collect(col *event.Collector, op string, extra event.Fields) listener {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			f := message(m)
			for k, v := range extra {
				f[k] = v
			}
			col.Add(op, f)
		}
		return consumer.ConsumeSuccess, nil
	}
}

// waitFor waits until col holds n messages, then lingers briefly so that a message delivered too many shows.
func waitFor(a args, col *event.Collector, n int, what string) {
	if !event.WaitUntil(a.deadline(), func() bool { return col.Len() >= n }) {
		event.Fail(fmt.Errorf("%s: %d of %d messages within %s", what, col.Len(), n, a.wait))
	}
	time.Sleep(time.Second)
}

func tagged(topic, body, tag string, keys ...string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(body)).WithTag(tag)
	if len(keys) > 0 {
		m.WithKeys(keys)
	}
	return m
}

// sends: sync, async, oneway and batch sends, then a push consumer receives them all.
func sends(a args) {
	p := newProducer(a)
	ctx := context.Background()
	m := tagged(a.topic, "sync", "TagA", "k-sync")
	m.WithProperty("src", "go")
	r, err := p.SendSync(ctx, m)
	emitSend(sendResult("sync", r, err))

	var wg sync.WaitGroup
	wg.Add(1)
	err = p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
		emitSend(sendResult("async", r, err))
		wg.Done()
	}, tagged(a.topic, "async", "TagA", "k-async"))
	event.Check("send async", err)
	wg.Wait()

	event.Check("send oneway", p.SendOneWay(ctx, tagged(a.topic, "oneway", "TagB")))
	emitSend(event.Fields{"kind": "oneway", "status": "SEND_OK"})

	batch := []*primitive.Message{}
	for i := 0; i < 3; i++ {
		batch = append(batch, tagged(a.topic, fmt.Sprintf("batch-%d", i), "TagB", fmt.Sprintf("k-batch-%d", i)))
	}
	r, err = p.SendSync(ctx, batch...)
	f := sendResult("batch", r, err)
	if err == nil {
		f["ids"] = len(strings.Split(r.MsgID, ","))
	}
	emitSend(f)
	event.Check("shutdown producer", p.Shutdown())

	var col event.Collector
	c := newPushConsumer(a, a.group, a.topic, consumer.MessageSelector{}, collect(&col, "recv", nil))
	waitFor(a, &col, 6, "push consumer")
	event.Check("shutdown consumer", c.Shutdown())
}

// filter: tagged messages with a numeric property; one group filters by tag, the other (G-sql) by SQL92.
func filter(a args) {
	p := newProducer(a)
	for i := 0; i < 9; i++ {
		m := tagged(a.topic, fmt.Sprintf("f-%d", i), []string{"TagA", "TagB", "TagC"}[i%3])
		m.WithProperty("a", strconv.Itoa(i))
		r, err := p.SendSync(context.Background(), m)
		emitSend(sendResult("sync", r, err))
	}
	event.Check("shutdown producer", p.Shutdown())
	var byTag, bySQL event.Collector
	c1 := newPushConsumer(a, a.group, a.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagB"},
		collect(&byTag, "recv", event.Fields{"consumer": "tag"}))
	c2 := newPushConsumer(a, a.group+"-sql", a.topic,
		consumer.MessageSelector{Type: consumer.SQL92, Expression: "a >= 4 AND TAGS <> 'TagB'"},
		collect(&bySQL, "recv", event.Fields{"consumer": "sql"}))
	waitFor(a, &byTag, 6, "tag consumer")
	waitFor(a, &bySQL, 3, "SQL92 consumer")
	event.Check("shutdown tag consumer", c1.Shutdown())
	event.Check("shutdown sql consumer", c2.Shutdown())
}

// byOrder picks the queue of a message from its "order" property: one order, one queue.
type byOrder struct{}

func (byOrder) Select(m *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	n, _ := strconv.Atoi(m.GetProperty("order"))
	sorted := append([]*primitive.MessageQueue(nil), mqs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].QueueId < sorted[j].QueueId })
	return sorted[n%len(sorted)]
}

// orderly: 4 orders of 5 steps, interleaved, sent with a queue selector; an orderly push consumer.
func orderly(a args) {
	p := newProducer(a, producer.WithQueueSelector(byOrder{}))
	for step := 0; step < 5; step++ {
		for order := 0; order < 4; order++ {
			m := tagged(a.topic, fmt.Sprintf("o%d-s%d", order, step), "TagO")
			m.WithProperty("order", strconv.Itoa(order))
			m.WithProperty("step", strconv.Itoa(step))
			m.WithShardingKey(strconv.Itoa(order))
			r, err := p.SendSync(context.Background(), m)
			emitSend(sendResult("selector", r, err))
		}
	}
	event.Check("shutdown producer", p.Shutdown())
	var col event.Collector
	c := newPushConsumer(a, a.group, a.topic, consumer.MessageSelector{}, collect(&col, "recv", nil),
		consumer.WithConsumerOrder(true))
	waitFor(a, &col, 20, "orderly consumer")
	event.Check("shutdown consumer", c.Shutdown())
}

// delay: one message with delay level 2 and one with a delivery timestamp 2 s ahead.
func delay(a args) {
	var col event.Collector
	c := newPushConsumer(a, a.group, a.topic, consumer.MessageSelector{}, collect(&col, "recv", nil))
	p := newProducer(a)
	m := tagged(a.topic, "level-2", "TagD")
	m.WithDelayTimeLevel(2)
	sent := event.NowMs()
	r, err := p.SendSync(context.Background(), m)
	f := sendResult("delayLevel", r, err)
	f["sentTs"] = sent
	emitSend(f)
	m = tagged(a.topic, "timestamp-2s", "TagD")
	sent = event.NowMs()
	m.WithDelayTimestamp(time.UnixMilli(sent + 2000))
	r, err = p.SendSync(context.Background(), m)
	f = sendResult("deliverTime", r, err)
	f["sentTs"] = sent
	emitSend(f)
	event.Check("shutdown producer", p.Shutdown())
	waitFor(a, &col, 2, "delayed messages")
	event.Check("shutdown consumer", c.Shutdown())
}

// txListener commits, rolls back or leaves unknown by body; the broker's check-back of the unknown one commits.
type txListener struct{ checks atomic.Int32 }

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "tx-commit":
		return primitive.CommitMessageState
	case "tx-rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.checks.Add(1)
	event.Emit("check", event.Fields{"body": string(m.Body), "props": m.GetProperties(), "msgId": m.MsgId,
		"topic": m.Topic})
	if string(m.Body) == "tx-unknown" {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func txState(s primitive.LocalTransactionState) string {
	return map[primitive.LocalTransactionState]string{primitive.CommitMessageState: "COMMIT_MESSAGE",
		primitive.RollbackMessageState: "ROLLBACK_MESSAGE", primitive.UnkonwnState: "UNKNOW"}[s]
}

// transaction: commit, rollback, and unknown resolved by the broker's check-back.
func transaction(a args) {
	l := &txListener{}
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer([]string{a.ns}),
		producer.WithGroupName(a.group+"-tx"), producer.WithInstanceName("tx-"+a.group), producer.WithRetry(2),
		producer.WithSendMsgTimeout(sendTimeout))
	event.Check("new transaction producer", err)
	event.Check("start transaction producer", p.Start())
	for _, body := range []string{"tx-commit", "tx-rollback", "tx-unknown"} {
		r, err := p.SendMessageInTransaction(context.Background(), tagged(a.topic, body, "TagT", "k-"+body))
		if err != nil {
			emitSend(event.Fields{"kind": "transaction", "body": body, "error": err.Error()})
		}
		f := sendResult("transaction", r.SendResult, nil)
		f["body"] = body
		f["state"] = txState(r.State)
		emitSend(f)
	}
	var col event.Collector
	c := newPushConsumer(a, a.group, a.topic, consumer.MessageSelector{}, collect(&col, "recv", nil))
	waitFor(a, &col, 2, "committed messages")
	time.Sleep(time.Second)
	event.Emit("checks", event.Fields{"count": l.checks.Load()})
	event.Check("shutdown consumer", c.Shutdown())
	event.Check("shutdown transaction producer", p.Shutdown())
}

// retry: a poison message is retried (ConsumeRetryLater) with growing reconsume times, then goes to the DLQ after
// maxReconsumeTimes 2; a pull consumer then reads %DLQ%<group>.
func retry(a args) {
	p := newProducer(a)
	for _, body := range []string{"poison", "fine"} {
		r, err := p.SendSync(context.Background(), tagged(a.topic, body, "TagR", "k-"+body))
		emitSend(sendResult("sync", r, err))
	}
	event.Check("shutdown producer", p.Shutdown())
	var col event.Collector
	c := newPushConsumer(a, a.group, a.topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				col.Add("recv", message(m))
				if string(m.Body) == "poison" {
					result = consumer.ConsumeRetryLater
				}
			}
			return result, nil
		}, consumer.WithMaxReconsumeTimes(2), consumer.WithConsumeMessageBatchMaxSize(1))
	poison := func(f event.Fields) bool { return f["body"] == "poison" }
	if !event.WaitUntil(a.deadline(), func() bool { return col.Count(poison) >= 3 }) {
		event.Fail(fmt.Errorf("poison message: %d of 3 deliveries within %s", col.Count(poison), a.wait))
	}
	time.Sleep(2 * time.Second) // a fourth delivery would be a difference
	event.Check("shutdown consumer", c.Shutdown())
	readDLQ(a, "%DLQ%"+a.group)
}

// readDLQ pulls queue 0 of the DLQ topic with a pull consumer until a message is there.
func readDLQ(a args, dlq string) {
	pc, err := rocketmq.NewPullConsumer(consumer.WithNameServer([]string{a.ns}), consumer.WithGroupName(a.group+"-dlq"),
		consumer.WithInstance("dlq-"+a.group))
	event.Check("new pull consumer", err)
	event.Check("subscribe pull consumer", pc.Subscribe(a.topic, consumer.MessageSelector{}))
	event.Check("start pull consumer", pc.Start())
	defer pc.Shutdown()
	mqs, err := pc.GetTopicRouteInfo(a.topic)
	event.Check("route of "+a.topic, err)
	q := &primitive.MessageQueue{Topic: dlq, BrokerName: mqs[0].BrokerName, QueueId: 0}
	var last event.Fields
	ok := event.WaitUntil(a.deadline(), func() bool {
		r, err := pc.PullFrom(context.Background(), q, 0, 32)
		if err != nil {
			last = event.Fields{"error": err.Error()}
			return false
		}
		last = event.Fields{"status": pullStatus(r.Status), "found": len(r.GetMessageExts()),
			"maxOffset": r.MaxOffset}
		for _, m := range r.GetMessageExts() {
			event.Emit("dlq", message(m))
		}
		return len(r.GetMessageExts()) > 0
	})
	event.Emit("dlqPull", last)
	if !ok {
		event.Fail(fmt.Errorf("nothing in %s within %s: %v", dlq, a.wait, last))
	}
}

func pullStatus(s primitive.PullStatus) string {
	return map[primitive.PullStatus]string{primitive.PullFound: "FOUND", primitive.PullNoNewMsg: "NO_NEW_MSG",
		primitive.PullNoMsgMatched: "NO_MATCHED_MSG", primitive.PullBrokerTimeout: "BROKER_TIMEOUT",
		primitive.PullOffsetIllegal: "OFFSET_ILLEGAL"}[s]
}

// pull: the lite pull consumer (Subscribe, Poll, ACK) reads 5 messages; then PullFrom reads a queue from 0.
func pull(a args) {
	p := newProducer(a)
	for i := 0; i < 5; i++ {
		r, err := p.SendSync(context.Background(), tagged(a.topic, fmt.Sprintf("pull-%d", i), "TagP"))
		emitSend(sendResult("sync", r, err))
	}
	event.Check("shutdown producer", p.Shutdown())
	pc, err := rocketmq.NewPullConsumer(consumer.WithNameServer([]string{a.ns}), consumer.WithGroupName(a.group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithInstance("pull-"+a.group))
	event.Check("new pull consumer", err)
	event.Check("subscribe", pc.Subscribe(a.topic, consumer.MessageSelector{}))
	event.Check("start pull consumer", pc.Start())
	got := 0
	queues := map[int]*primitive.MessageQueue{}
	ok := event.WaitUntil(a.deadline(), func() bool {
		cr, err := pc.Poll(context.Background(), time.Second)
		if consumer.IsNoNewMsgError(err) {
			return got >= 5
		}
		event.Check("poll", err)
		for _, m := range cr.GetMsgList() {
			event.Emit("recv", message(m))
			got++
		}
		queues[cr.GetMQ().QueueId] = cr.GetMQ()
		pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		return got >= 5
	})
	if !ok {
		event.Fail(fmt.Errorf("poll: %d of 5 messages within %s", got, a.wait))
	}
	ids := []int{}
	for id := range queues {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	q := queues[ids[0]]
	r, err := pc.PullFrom(context.Background(), q, 0, 32)
	event.Check("pull from", err)
	bodies := []string{}
	for _, m := range r.GetMessageExts() {
		bodies = append(bodies, string(m.Body))
	}
	event.Emit("pullFrom", event.Fields{"queue": q.QueueId, "status": pullStatus(r.Status), "bodies": bodies,
		"nextBeginOffset": r.NextBeginOffset, "minOffset": r.MinOffset, "maxOffset": r.MaxOffset})
	event.Check("shutdown pull consumer", pc.Shutdown())
}

// adminCalls: what the v2 admin API offers: create a topic on the broker, list topics, its publish queues, the
// broker's subscription groups, delete the topic.
func adminCalls(a args) {
	if a.broker == "" {
		event.Fail(fmt.Errorf("admin needs -broker"))
	}
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{a.ns})))
	event.Check("new admin", err)
	defer adm.Close()
	ctx := context.Background()
	topic := a.topic + "-made"
	err = adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(a.broker),
		admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2))
	event.Emit("createTopic", errFields(err))
	listed := func() bool {
		l, err := adm.FetchAllTopicList(ctx)
		event.Check("fetch all topic list", err)
		for _, t := range l.TopicList {
			if t == topic {
				return true
			}
		}
		return false
	}
	event.Emit("topicListed", event.Fields{"listed": event.WaitUntil(time.Now().Add(15*time.Second), listed)})
	mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
	f := errFields(err)
	f["queues"] = len(mqs)
	event.Emit("publishQueues", f)
	groups, err := adm.GetAllSubscriptionGroup(ctx, a.broker, 5*time.Second)
	event.Check("get all subscription groups", err)
	g := event.Fields{"found": false}
	for _, c := range groups.SubscriptionGroupTable {
		if c.GroupName == a.group {
			g = event.Fields{"found": true, "retryMaxTimes": c.RetryMaxTimes, "consumeEnable": c.ConsumeEnable,
				"retryQueueNums": c.RetryQueueNums, "consumeBroadcastEnable": c.ConsumeBroadcastEnable}
		}
	}
	event.Emit("group", g)
	err = adm.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(a.broker),
		admin.WithNameSrvAddr([]string{a.ns}))
	event.Emit("deleteTopic", errFields(err))
	event.Emit("topicGone", event.Fields{"gone": event.WaitUntil(time.Now().Add(15*time.Second),
		func() bool { return !listed() })})
}

func errFields(err error) event.Fields {
	if err != nil {
		return event.Fields{"error": err.Error()}
	}
	return event.Fields{"ok": true}
}
