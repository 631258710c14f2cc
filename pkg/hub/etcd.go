package hub

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdStartTimeout is how long the embedded etcd may take to be ready.
const etcdStartTimeout = time.Minute

// embeddedEtcd is etcd in the hub's process, on loopback ports it picks,
// with its data in dir.
type embeddedEtcd struct {
	etcd     *embed.Etcd
	stopping *atomic.Bool
	// Endpoint is the client URL.
	Endpoint string
}

// startEtcd starts etcd with its data in dir, listening on 127.0.0.1
// only, and waits until it serves.
func startEtcd(dir string) (*embeddedEtcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg := embed.NewConfig()
	cfg.Name = "ferry-hub"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	// Errors are logged until the hub stops it: a clean stop closes its
	// listeners, which etcd reports as errors of its own.
	stopping := &atomic.Bool{}
	lc := logutil.DefaultZapLoggerConfig
	lc.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	lg, err := lc.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietOnStop{Core: c, stopping: stopping} }))
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	// Revisions older than an hour are compacted (the apiserver compacts too).
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "1h"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("the embedded etcd in %s: %w", dir, err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return nil, fmt.Errorf("the embedded etcd in %s was not ready after %s", dir, etcdStartTimeout)
	}
	return &embeddedEtcd{etcd: e, stopping: stopping, Endpoint: client.String()}, nil
}

// Stop stops etcd, after its pending writes.
func (e *embeddedEtcd) Stop() {
	e.stopping.Store(true)
	e.etcd.Close()
}

// quietOnStop drops every entry once stopping is set.
type quietOnStop struct {
	zapcore.Core
	stopping *atomic.Bool
}

func (q quietOnStop) With(f []zapcore.Field) zapcore.Core {
	return quietOnStop{Core: q.Core.With(f), stopping: q.stopping}
}

func (q quietOnStop) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if q.stopping.Load() {
		return ce
	}
	return q.Core.Check(e, ce)
}

// freePorts returns n TCP ports of 127.0.0.1 free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// checkEtcd checks, within etcdCheckTimeout, that the etcd at servers
// answers, so that a wrong address is named at once.
func checkEtcd(servers []string) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: servers, DialTimeout: etcdCheckTimeout, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd servers %s: %w", strings.Join(servers, ","), err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdCheckTimeout)
	defer cancel()
	if _, err := c.Status(ctx, servers[0]); err != nil {
		return fmt.Errorf("etcd servers %s: no answer within %s: %w", strings.Join(servers, ","), etcdCheckTimeout, err)
	}
	return nil
}

// etcdCheckTimeout bounds checkEtcd.
const etcdCheckTimeout = 10 * time.Second
