// Command grpc5 runs one scenario of the official Go gRPC client (github.com/apache/rocketmq-clients/golang/v5)
// against a 5.x gRPC endpoint, as an application does, and prints one JSON line per event ({"op": "send", ...}).
// It exits non-zero with the error on stderr when a step fails.
//
//	grpc5 -endpoint 127.0.0.1:8081 -topic T -group G [-wait 60] [-tls] SCENARIO
//
// -tls leaves the client's TLS as it comes (rmq.EnableSsl true: TLS, the server's certificate not checked);
// without it the client speaks plaintext.
//
// Scenarios: normal, invisible, push, fifo, delay, transaction, priority, lite, recall, dlq. The topic (with the
// message.type the scenario needs) and the group are created beforehand with mqadmin, as an operator does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"rmqdcompat/internal/event"
)

type args struct {
	endpoint, topic, group string
	wait                   time.Duration
}

func (a args) deadline() time.Time { return time.Now().Add(a.wait) }

func (a args) config(group string) *rmq.Config {
	return &rmq.Config{Endpoint: a.endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

func main() {
	var a args
	var waitSec int
	var useTLS bool
	flag.StringVar(&a.endpoint, "endpoint", "", "gRPC endpoint")
	flag.StringVar(&a.topic, "topic", "", "topic, created beforehand")
	flag.StringVar(&a.group, "group", "", "consumer group, created beforehand")
	flag.IntVar(&waitSec, "wait", 60, "longest wait for the messages a consumer expects, seconds")
	flag.BoolVar(&useTLS, "tls", false, "TLS as the client's default configuration has it")
	flag.Parse()
	a.wait = time.Duration(waitSec) * time.Second
	if flag.NArg() != 1 || a.endpoint == "" || a.topic == "" || a.group == "" {
		fmt.Fprintln(os.Stderr, "usage: grpc5 -endpoint ADDR -topic T -group G [-wait S] SCENARIO")
		os.Exit(2)
	}
	rmq.EnableSsl = useTLS
	event.Emit("client", event.Fields{"tls": useTLS})
	scenarios := map[string]func(args){
		"normal": normal, "invisible": invisible, "push": push, "fifo": fifo, "delay": delay,
		"transaction": transaction, "priority": priority, "lite": lite, "recall": recall, "dlq": dlq,
	}
	run, ok := scenarios[flag.Arg(0)]
	if !ok {
		event.Fail(fmt.Errorf("unknown scenario %q", flag.Arg(0)))
	}
	run(a)
	event.Emit("done", nil)
}

// requestTimeout bounds every request of the clients (3 s by default): these machines are shared and busy.
const requestTimeout = 10 * time.Second

func newClient(c *rmq.Config, opts ...rmq.ClientOption) (rmq.Client, error) {
	return rmq.NewClient(c, append(opts, rmq.WithQueryRouteTimeout(requestTimeout))...)
}

func newProducer(a args, opts ...rmq.ProducerOption) rmq.Producer {
	p, err := rmq.NewProducer(a.config(""), append([]rmq.ProducerOption{rmq.WithTopics(a.topic),
		rmq.WithClientFunc(newClient)}, opts...)...)
	event.Check("new producer", err)
	event.Check("start producer", p.Start())
	return p
}

func msg(a args, body, tag string, keys ...string) *rmq.Message {
	m := &rmq.Message{Topic: a.topic, Body: []byte(body)}
	if tag != "" {
		m.SetTag(tag)
	}
	if len(keys) > 0 {
		m.SetKeys(keys...)
	}
	return m
}

// errFields is an RPC status as the client reports it (code and message), or the error text.
func errFields(err error) event.Fields {
	var st *rmq.ErrRpcStatus
	if errors.As(err, &st) {
		return event.Fields{"code": st.GetCode(), "message": st.GetMessage()}
	}
	return event.Fields{"error": err.Error()}
}

func send(p rmq.Producer, kind string, m *rmq.Message) []*rmq.SendReceipt {
	sent := event.NowMs()
	r, err := p.Send(context.Background(), m)
	f := event.Fields{"kind": kind, "body": string(m.Body), "sentTs": sent}
	if err != nil {
		f["error"] = errFields(err)
	} else {
		f["receipts"] = len(r)
		f["messageId"] = r[0].MessageID
		f["hasRecallHandle"] = r[0].RecallHandle != ""
		f["hasTransactionId"] = r[0].TransactionId != ""
	}
	event.Emit("send", f)
	if err != nil {
		event.Fail(fmt.Errorf("send %s refused: %w", m.Body, err)) // what should follow cannot
	}
	return r
}

// view is what a consumer saw of one message.
func view(mv *rmq.MessageView) event.Fields {
	f := event.Fields{"messageId": mv.GetMessageId(), "topic": mv.GetTopic(), "body": string(mv.GetBody()),
		"keys": mv.GetKeys(), "props": mv.GetProperties(), "attempt": mv.GetDeliveryAttempt(),
		"liteTopic": mv.GetLiteTopic(), "offset": mv.GetOffset(), "recvTs": event.NowMs()}
	if t := mv.GetTag(); t != nil {
		f["tag"] = *t
	}
	if g := mv.GetMessageGroup(); g != nil {
		f["group"] = *g
	}
	if t := mv.GetDeliveryTimestamp(); t != nil {
		f["deliveryTs"] = t.UnixMilli()
	}
	if t := mv.GetBornTimestamp(); t != nil {
		f["bornTs"] = t.UnixMilli()
	}
	return f
}

func newSimpleConsumer(a args, group string, expr *rmq.FilterExpression) rmq.SimpleConsumer {
	c, err := rmq.NewSimpleConsumer(a.config(group), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{a.topic: expr}),
		rmq.WithClientFuncForSimpleConsumer(newClient))
	event.Check("new simple consumer "+group, err)
	event.Check("start simple consumer "+group, c.Start())
	return c
}

// receive asks once; MESSAGE_NOT_FOUND (40401) is an empty answer, any other status is reported as an event.
func receive(c rmq.SimpleConsumer, max int32, invisible time.Duration) []*rmq.MessageView {
	mvs, err := c.Receive(context.Background(), max, invisible)
	if err != nil {
		var st *rmq.ErrRpcStatus
		if errors.As(err, &st) && st.GetCode() == 40401 {
			return nil
		}
		event.Emit("receiveError", errFields(err))
		time.Sleep(200 * time.Millisecond)
		return nil
	}
	return mvs
}

// receiveAll receives and acks until n messages came or the deadline passed; keep decides which are acked.
func receiveAll(a args, c rmq.SimpleConsumer, n int, what string) []event.Fields {
	return receiveAllAs(a, c, n, what, "recv")
}

// receiveAllAs is receiveAll reporting each message as an event op.
func receiveAllAs(a args, c rmq.SimpleConsumer, n int, what, op string) []event.Fields {
	var got []event.Fields
	ok := event.WaitUntil(a.deadline(), func() bool {
		for _, mv := range receive(c, 16, 10*time.Second) {
			f := view(mv)
			event.Emit(op, f)
			got = append(got, f)
			if err := c.Ack(context.Background(), mv); err != nil {
				e := errFields(err)
				e["body"] = f["body"]
				event.Emit("ackError", e)
			}
		}
		return len(got) >= n
	})
	if !ok {
		event.Fail(fmt.Errorf("%s: %d of %d messages within %s", what, len(got), n, a.wait))
	}
	return got
}

// lingerNothing receives for a while and reports what came although it should not have.
func lingerNothing(c rmq.SimpleConsumer, d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, mv := range receive(c, 16, 10*time.Second) {
			event.Emit("recv", view(mv))
			_ = c.Ack(context.Background(), mv)
		}
	}
}

// normal: sync sends (tag, keys, a property) and an async one; a simple consumer receives and acks them.
func normal(a args) {
	p := newProducer(a)
	for i := 0; i < 3; i++ {
		m := msg(a, fmt.Sprintf("normal-%d", i), []string{"TagA", "TagB", "TagA"}[i], fmt.Sprintf("k%d", i), "shared")
		m.AddProperty("src", "go")
		send(p, "sync", m)
	}
	done := make(chan struct{})
	m := msg(a, "normal-async", "TagA")
	sent := event.NowMs()
	p.SendAsync(context.Background(), m, func(_ context.Context, r []*rmq.SendReceipt, err error) {
		f := event.Fields{"kind": "async", "body": "normal-async", "sentTs": sent}
		if err != nil {
			f["error"] = errFields(err)
		} else {
			f["receipts"] = len(r)
			f["messageId"] = r[0].MessageID
		}
		event.Emit("send", f)
		close(done)
	})
	<-done
	event.Check("stop producer", p.GracefulStop())
	c := newSimpleConsumer(a, a.group, rmq.NewFilterExpression("TagA"))
	receiveAll(a, c, 3, "simple consumer, tag TagA")
	lingerNothing(c, 2*time.Second)
	event.Check("stop simple consumer", c.GracefulStop())
}

// invisible: receive two messages; ack one, change the other's invisible duration to 2 s; it comes back with
// delivery attempt 2 no sooner, and is acked then.
func invisible(a args) {
	p := newProducer(a)
	send(p, "sync", msg(a, "ack-me", "TagI"))
	send(p, "sync", msg(a, "hide-me", "TagI"))
	event.Check("stop producer", p.GracefulStop())
	c := newSimpleConsumer(a, a.group, rmq.SUB_ALL)
	var first []*rmq.MessageView
	bodies := map[string]bool{}
	event.WaitUntil(a.deadline(), func() bool {
		for _, mv := range receive(c, 16, 10*time.Second) {
			first = append(first, mv)
			bodies[string(mv.GetBody())] = true
		}
		return len(bodies) >= 2
	})
	if len(bodies) < 2 {
		event.Fail(fmt.Errorf("first receive: %d of 2 messages", len(bodies)))
	}
	var changedAt int64
	for _, mv := range first {
		f := view(mv)
		event.Emit("recv", f)
		if f["body"] == "ack-me" {
			e := event.Fields{"body": "ack-me", "ok": true}
			if err := c.Ack(context.Background(), mv); err != nil {
				e = errFields(err)
			}
			event.Emit("ack", e)
			continue
		}
		changedAt = event.NowMs()
		e := event.Fields{"body": f["body"], "ok": true}
		if err := c.ChangeInvisibleDuration(mv, 2*time.Second); err != nil {
			e = errFields(err)
		}
		event.Emit("changeInvisible", e)
	}
	var again []event.Fields
	event.WaitUntil(a.deadline(), func() bool {
		for _, mv := range receive(c, 16, 10*time.Second) {
			f := view(mv)
			f["afterChangeMs"] = event.NowMs() - changedAt
			event.Emit("again", f)
			again = append(again, f)
			e := event.Fields{"body": f["body"], "ok": true}
			if err := c.Ack(context.Background(), mv); err != nil {
				e = errFields(err)
			}
			event.Emit("ack", e)
		}
		return len(again) >= 1
	})
	lingerNothing(c, 2*time.Second)
	event.Check("stop simple consumer", c.GracefulStop())
}

func newPushConsumer(a args, group string, expr *rmq.FilterExpression,
	consume func(*rmq.MessageView) rmq.ConsumerResult) rmq.PushConsumer {
	var c rmq.PushConsumer
	startRetried("start push consumer "+group, func() (func() error, error) {
		var err error
		c, err = rmq.NewPushConsumer(a.config(group), rmq.WithPushAwaitDuration(2*time.Second),
			rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{a.topic: expr}),
			rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: consume}),
			rmq.WithPushConsumptionThreadCount(4))
		event.Check("new push consumer "+group, err)
		return c.Start, nil
	})
	return c
}

// startRetried makes a client and starts it, three times at most: no option sets a push consumer's request timeout
// (3 s), which a busy machine can exceed while the client queries its first route.
func startRetried(step string, make func() (func() error, error)) {
	var err error
	for i := 0; i < 3; i++ {
		start, _ := make()
		if err = start(); err == nil {
			return
		}
		event.Emit("startRetry", event.Fields{"step": step, "error": err.Error()})
		time.Sleep(time.Second)
	}
	event.Check(step, err)
}

func succeed(col *event.Collector) func(*rmq.MessageView) rmq.ConsumerResult {
	return func(mv *rmq.MessageView) rmq.ConsumerResult {
		col.Add("recv", view(mv))
		return rmq.SUCCESS
	}
}

func waitFor(a args, col *event.Collector, n int, what string) {
	if !event.WaitUntil(a.deadline(), func() bool { return col.Len() >= n }) {
		event.Fail(fmt.Errorf("%s: %d of %d messages within %s", what, col.Len(), n, a.wait))
	}
	time.Sleep(time.Second)
}

// push: a push consumer with a tag filter receives what matches.
func push(a args) {
	p := newProducer(a)
	for i := 0; i < 6; i++ {
		send(p, "sync", msg(a, fmt.Sprintf("push-%d", i), []string{"TagA", "TagB", "TagC"}[i%3]))
	}
	event.Check("stop producer", p.GracefulStop())
	var col event.Collector
	c := newPushConsumer(a, a.group, rmq.NewFilterExpression("TagA || TagC"), succeed(&col))
	waitFor(a, &col, 4, "push consumer")
	event.Check("stop push consumer", c.GracefulStop())
}

// fifo: three message groups of five, interleaved, to a FIFO topic; a push consumer of a FIFO group.
func fifo(a args) {
	p := newProducer(a)
	for step := 0; step < 5; step++ {
		for g := 0; g < 3; g++ {
			m := msg(a, fmt.Sprintf("g%d-s%d", g, step), "TagF")
			m.SetMessageGroup(fmt.Sprintf("group-%d", g))
			send(p, "fifo", m)
		}
	}
	event.Check("stop producer", p.GracefulStop())
	var col event.Collector
	c := newPushConsumer(a, a.group, rmq.SUB_ALL, succeed(&col))
	waitFor(a, &col, 15, "FIFO push consumer")
	event.Check("stop push consumer", c.GracefulStop())
}

// delay: a message with a delivery timestamp 2 s ahead; a simple consumer gets it no sooner.
func delay(a args) {
	c := newSimpleConsumer(a, a.group, rmq.SUB_ALL)
	p := newProducer(a)
	m := msg(a, "delayed-2s", "TagD")
	m.SetDelayTimestamp(time.Now().Add(2 * time.Second))
	send(p, "delay", m)
	event.Check("stop producer", p.GracefulStop())
	receiveAll(a, c, 1, "delayed message")
	event.Check("stop simple consumer", c.GracefulStop())
}

// transaction: commit, rollback, and one left open that the broker checks back (the checker commits it).
func transaction(a args) {
	var checks atomic.Int32
	checker := &rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
		checks.Add(1)
		event.Emit("check", view(mv))
		if string(mv.GetBody()) == "tx-open" {
			return rmq.COMMIT
		}
		return rmq.ROLLBACK
	}}
	p := newProducer(a, rmq.WithTransactionChecker(checker))
	for _, body := range []string{"tx-commit", "tx-rollback", "tx-open"} {
		tx := p.BeginTransaction()
		r, err := p.SendWithTransaction(context.Background(), msg(a, body, "TagT", "k-"+body), tx)
		f := event.Fields{"kind": "transaction", "body": body}
		if err != nil {
			f["error"] = errFields(err)
			event.Emit("send", f)
			event.Fail(fmt.Errorf("transactional send %s refused: %w", body, err))
		}
		f["receipts"] = len(r)
		f["hasTransactionId"] = r[0].TransactionId != ""
		event.Emit("send", f)
		var end error
		switch body {
		case "tx-commit":
			end = tx.Commit()
		case "tx-rollback":
			end = tx.RollBack()
		default:
			continue
		}
		e := event.Fields{"body": body, "ok": true}
		if end != nil {
			e = errFields(end)
			e["body"] = body
		}
		event.Emit("end", e)
	}
	c := newSimpleConsumer(a, a.group, rmq.SUB_ALL)
	receiveAll(a, c, 2, "committed messages")
	lingerNothing(c, 2*time.Second)
	event.Emit("checks", event.Fields{"count": checks.Load()})
	event.Check("stop simple consumer", c.GracefulStop())
	event.Check("stop producer", p.GracefulStop())
}

// priority: a backlog of messages with priorities 0..3 on a PRIORITY topic, then one simple consumer receives.
func priority(a args) {
	p := newProducer(a)
	for round := 0; round < 2; round++ {
		for prio := int32(0); prio < 4; prio++ {
			m := msg(a, fmt.Sprintf("p%d-r%d", prio, round), "TagP")
			event.Check("set priority", m.SetPriority(prio))
			send(p, "priority", m)
		}
	}
	event.Check("stop producer", p.GracefulStop())
	c := newSimpleConsumer(a, a.group, rmq.SUB_ALL)
	receiveAll(a, c, 8, "priority messages")
	event.Check("stop simple consumer", c.GracefulStop())
}

// lite: a LITE parent topic; a LitePushConsumer of a lite group subscribes two lite topics; a third gets messages
// too, which must not arrive.
func lite(a args) {
	var col event.Collector
	var c rmq.LitePushConsumer
	startRetried("start lite push consumer", func() (func() error, error) {
		var err error
		c, err = rmq.NewLitePushConsumer(a.config(a.group), rmq.NewLitePushConsumerConfig(a.topic, 10*time.Second),
			rmq.WithPushAwaitDuration(2*time.Second),
			rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: succeed(&col)}))
		event.Check("new lite push consumer", err)
		return c.Start, nil
	})
	for _, lt := range []string{"chat-a", "chat-b"} {
		var err error
		// the client's quota is 0 until the server's settings arrive (asynchronously, after start)
		event.WaitUntil(time.Now().Add(15*time.Second), func() bool {
			err = c.SubscribeLite(lt)
			return err == nil
		})
		f := event.Fields{"liteTopic": lt, "ok": true}
		if err != nil {
			f = errFields(err)
			f["liteTopic"] = lt
		}
		event.Emit("subscribeLite", f)
	}
	p := newProducer(a)
	for i := 0; i < 3; i++ {
		for _, lt := range []string{"chat-a", "chat-b", "nobody"} {
			m := msg(a, fmt.Sprintf("%s-%d", lt, i), "")
			m.SetLiteTopic(lt)
			send(p, "lite", m)
		}
	}
	event.Check("stop producer", p.GracefulStop())
	waitFor(a, &col, 6, "lite push consumer")
	err := c.UnSubscribeLite("chat-b")
	f := event.Fields{"liteTopic": "chat-b", "ok": err == nil}
	if err != nil {
		f = errFields(err)
	}
	event.Emit("unsubscribeLite", f)
	event.Check("stop lite push consumer", c.GracefulStop())
}

// recall: two delay messages 8 s ahead; the first is recalled before its time; only the second arrives. (Java refuses
// a recall close to the delivery time: "timestamp invalid".)
func recall(a args) {
	c := newSimpleConsumer(a, a.group, rmq.SUB_ALL)
	p := newProducer(a)
	var handles []string
	for _, body := range []string{"recall-me", "keep-me"} {
		m := msg(a, body, "TagR")
		m.SetDelayTimestamp(time.Now().Add(8 * time.Second))
		r := send(p, "delay", m)
		if len(r) > 0 {
			handles = append(handles, r[0].RecallHandle)
		}
	}
	if len(handles) != 2 {
		event.Fail(fmt.Errorf("delay sends failed"))
	}
	id, err := p.Recall(context.Background(), a.topic, handles[0])
	f := event.Fields{"ok": err == nil, "messageId": id}
	if err != nil {
		f = errFields(err)
	}
	event.Emit("recall", f)
	id, err = p.Recall(context.Background(), a.topic, "not-a-handle")
	f = event.Fields{"ok": err == nil, "messageId": id}
	if err != nil {
		f = errFields(err)
	}
	event.Emit("recallBad", f)
	event.Check("stop producer", p.GracefulStop())
	receiveAll(a, c, 1, "the message not recalled")
	lingerNothing(c, 2*time.Second)
	event.Check("stop simple consumer", c.GracefulStop())
}

// dlq: a push consumer that always fails. The group's retryMaxTimes is 1: two deliveries, then the message goes to
// %DLQ%<group> (the Java proxy moves it there when it would deliver it a third time, so the consumer stays online
// until a simple consumer of <group>-dlq has read it from the DLQ).
func dlq(a args) {
	p := newProducer(a)
	send(p, "sync", msg(a, "poison", "TagX", "k-poison"))
	event.Check("stop producer", p.GracefulStop())
	var col event.Collector
	c := newPushConsumer(a, a.group, rmq.SUB_ALL, func(mv *rmq.MessageView) rmq.ConsumerResult {
		col.Add("recv", view(mv))
		return rmq.FAILURE
	})
	if !event.WaitUntil(a.deadline(), func() bool { return col.Len() >= 2 }) {
		event.Fail(fmt.Errorf("poison message: %d of 2 deliveries within %s", col.Len(), a.wait))
	}
	dl := args{endpoint: a.endpoint, topic: "%DLQ%" + a.group, group: a.group + "-dlq", wait: a.wait}
	var dc rmq.SimpleConsumer
	var lastErr error
	// the DLQ topic exists once the first message went there: until then the consumer cannot start
	event.WaitUntil(a.deadline(), func() bool {
		sc, err := rmq.NewSimpleConsumer(dl.config(dl.group), rmq.WithSimpleAwaitDuration(2*time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{dl.topic: rmq.SUB_ALL}),
			rmq.WithClientFuncForSimpleConsumer(newClient))
		event.Check("new DLQ consumer", err)
		if lastErr = sc.Start(); lastErr != nil {
			time.Sleep(time.Second)
			return false
		}
		dc = sc
		return true
	})
	if dc == nil {
		event.Fail(fmt.Errorf("the DLQ consumer did not start within %s: %v", a.wait, lastErr))
	}
	receiveAllAs(dl, dc, 1, "the DLQ", "dlq")
	event.Check("stop DLQ consumer", dc.GracefulStop())
	event.Check("stop push consumer", c.GracefulStop())
}
