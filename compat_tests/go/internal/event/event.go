// Package event prints what a scenario program observed, one JSON object per line on stdout
// ({"op": "send", ...}), the format compat_tests/javakit.py parses for our Java programs too.
package event

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

var mu sync.Mutex

// start is when the program began: each event carries "t", the milliseconds since then.
var start = time.Now()

// Fields of one event besides its "op".
type Fields map[string]any

// Emit prints one event line; safe from any goroutine.
func Emit(op string, f Fields) {
	line := Fields{"op": op, "t": time.Since(start).Milliseconds()}
	for k, v := range f {
		line[k] = v
	}
	out, err := json.Marshal(line)
	if err != nil {
		Fail(fmt.Errorf("event %s: %w", op, err))
	}
	mu.Lock()
	defer mu.Unlock()
	os.Stdout.Write(append(out, '\n'))
}

// Fail prints the error on stderr and exits 1.
func Fail(err error) {
	mu.Lock()
	fmt.Fprintf(os.Stderr, "scenario failed: %v\n", err)
	os.Exit(1)
}

// Check fails the program when err is not nil, naming the step.
func Check(step string, err error) {
	if err != nil {
		Fail(fmt.Errorf("%s: %w", step, err))
	}
}

// NowMs is the wall clock in milliseconds (the brokers' timestamps are too).
func NowMs() int64 {
	return time.Now().UnixMilli()
}

// WaitUntil polls cond every 20 ms until it holds (true) or the deadline passes (false).
func WaitUntil(deadline time.Time, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Collector gathers what consumers received, guarded by one lock.
type Collector struct {
	mu    sync.Mutex
	items []Fields
}

// Add records one received message (also emitted as an event of op).
func (c *Collector) Add(op string, f Fields) {
	c.mu.Lock()
	c.items = append(c.items, f)
	c.mu.Unlock()
	Emit(op, f)
}

// Len is how many were received.
func (c *Collector) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Count is how many received items satisfy pred.
func (c *Collector) Count(pred func(Fields) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, it := range c.items {
		if pred(it) {
			n++
		}
	}
	return n
}
