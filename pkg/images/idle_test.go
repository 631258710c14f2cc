package images

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestSilentRegistry: a registry that accepts connections and never
// answers fails the image, naming it, instead of hanging.
func TestSilentRegistry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	c := NewCopier(Options{IdleTimeout: 300 * time.Millisecond, Retry: RetryPolicy{Attempts: 2, Initial: 10e6, Max: 20e6}})
	start := time.Now()
	src := ln.Addr().String() + "/x/y:1"
	res := c.Copy(context.Background(), Task{Source: src, Target: "127.0.0.1:1/x/y:1"})
	if res.Outcome != Failed || !strings.Contains(res.Error, src) {
		t.Errorf("copy from a silent registry: %+v", res)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("copy from a silent registry took %s", took)
	}
	t.Logf("failed after %s: %s", time.Since(start).Round(time.Millisecond), res.Error)
}
