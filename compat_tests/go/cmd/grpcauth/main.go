// Command grpcauth probes access control 2.0 with the official Go gRPC client
// (github.com/apache/rocketmq-clients/golang/v5): each identity signs with its SessionCredentials (none for "-")
// and runs its operations against one endpoint; the outcome of every cell is printed as one JSON object on one
// line, {"<ak>:<sk>/<op>": {"ok": bool, "code": int, "error": string|null}}.
//
//	grpcauth -endpoint 127.0.0.1:8081 -cells '[[["uPub","uPubPass01"],["send:mx-pub","receive:mx-sub:mx-g1"]]]'
//
// Operations: send:TOPIC (a producer started with the topic, WithTopics, sends one message tagged TagA: a Go
// producer started without topics never gets its settings, so never starts; a refused route query fails its
// start) and
// receive:TOPIC:GROUP (a simple consumer of GROUP subscribed to TOPIC with "*", started, receives once; an empty
// answer, MESSAGE_NOT_FOUND, is a success). The code is the broker's status code (the client's ErrRpcStatus, or
// the "CODE: NAME, MESSAGE: text" it wraps in a startup error), -1 without one; the error is the status message,
// or the error's text when there is no status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// requestTimeout bounds each request as the Java probe's setRequestTimeout(5 s) does; stepTimeout bounds a
// whole step (a client's start waits for its settings, which a refused identity may never get).
const (
	requestTimeout = 5 * time.Second
	stepTimeout    = 30 * time.Second
)

type outcome struct {
	Ok    bool    `json:"ok"`
	Code  int32   `json:"code"`
	Error *string `json:"error"`
}

// cell is one identity ([accessKey, secretKey]) and its operations.
type cell struct {
	identity [2]string
	ops      []string
}

func (c *cell) UnmarshalJSON(b []byte) error {
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[0], &c.identity); err != nil {
		return err
	}
	return json.Unmarshal(raw[1], &c.ops)
}

// wrapped is a status the client put into an error's text (startup errors are formatted with %v).
var wrapped = regexp.MustCompile(`CODE: (\w+), MESSAGE: (.*?)(?:, requestId=.*)?$`)

func result(err error) outcome {
	if err == nil {
		return outcome{Ok: true}
	}
	var st *rmq.ErrRpcStatus
	if errors.As(err, &st) {
		msg := st.GetMessage()
		return outcome{Code: st.GetCode(), Error: &msg}
	}
	text := err.Error()
	if m := wrapped.FindStringSubmatch(text); m != nil {
		if code, ok := v2.Code_value[m[1]]; ok {
			return outcome{Code: code, Error: &m[2]}
		}
	}
	return outcome{Code: -1, Error: &text}
}

// bounded runs f with the step's deadline: a client that never answers is a timeout, not a hang.
func bounded(what string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(stepTimeout):
		return fmt.Errorf("%s: timeout after %s", what, stepTimeout)
	}
}

func newClient(c *rmq.Config, opts ...rmq.ClientOption) (rmq.Client, error) {
	return rmq.NewClient(c, append(opts, rmq.WithQueryRouteTimeout(requestTimeout))...)
}

func config(endpoint string, identity [2]string, group string) *rmq.Config {
	c := &rmq.Config{Endpoint: endpoint, ConsumerGroup: group}
	if identity[0] != "-" {
		c.Credentials = &credentials.SessionCredentials{AccessKey: identity[0], AccessSecret: identity[1]}
	}
	return c
}

func send(endpoint string, identity [2]string, topic string) error {
	p, err := rmq.NewProducer(config(endpoint, identity, ""), rmq.WithTopics(topic), rmq.WithClientFunc(newClient))
	if err != nil {
		return err
	}
	if err := bounded("start producer", p.Start); err != nil {
		return err
	}
	defer p.GracefulStop()
	m := &rmq.Message{Topic: topic, Body: []byte("auth")}
	m.SetTag("TagA")
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	_, err = p.Send(ctx, m)
	return err
}

func receive(endpoint string, identity [2]string, topic, group string) error {
	c, err := rmq.NewSimpleConsumer(config(endpoint, identity, group), rmq.WithSimpleAwaitDuration(time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithClientFuncForSimpleConsumer(newClient))
	if err != nil {
		return err
	}
	if err := bounded("start simple consumer", c.Start); err != nil {
		return err
	}
	defer c.GracefulStop()
	return bounded("receive", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		_, err := c.Receive(ctx, 1, 10*time.Second)
		var st *rmq.ErrRpcStatus
		if errors.As(err, &st) && st.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND) {
			return nil
		}
		return err
	})
}

func run(endpoint string, cells []cell) map[string]outcome {
	out := map[string]outcome{}
	for _, c := range cells {
		for _, op := range c.ops {
			parts := strings.Split(op, ":")
			var err error
			switch {
			case parts[0] == "send" && len(parts) == 2:
				err = send(endpoint, c.identity, parts[1])
			case parts[0] == "receive" && len(parts) == 3:
				err = receive(endpoint, c.identity, parts[1], parts[2])
			default:
				fmt.Fprintf(os.Stderr, "grpcauth: unknown operation %q\n", op)
				os.Exit(2)
			}
			k := fmt.Sprintf("%s:%s/%s", c.identity[0], c.identity[1], op)
			out[k] = result(err)
			fmt.Fprintf(os.Stderr, "grpcauth: %s -> %v\n", k, err)
		}
	}
	return out
}

func main() {
	endpoint := flag.String("endpoint", "", "gRPC endpoint")
	cellsJSON := flag.String("cells", "", `[[[accessKey, secretKey], [op, ...]], ...]`)
	flag.Parse()
	var cells []cell
	if *endpoint == "" || json.Unmarshal([]byte(*cellsJSON), &cells) != nil {
		fmt.Fprintln(os.Stderr, "usage: grpcauth -endpoint ADDR -cells JSON")
		os.Exit(2)
	}
	rmq.EnableSsl = false
	line, err := json.Marshal(run(*endpoint, cells))
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcauth:", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(line, '\n'))
	os.Exit(0)
}
