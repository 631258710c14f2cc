package kube

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/tools/metrics"
)

// apiRetries counts the API-server requests client-go retried in this
// process: 429 Too Many Requests and 5xx answers carrying Retry-After,
// which client-go honours (up to 10 retries, waiting as the server says).
var apiRetries atomic.Int64

type retryCounter struct{}

func (retryCounter) IncrementRetry(context.Context, string, string, string) { apiRetries.Add(1) }

func init() { metrics.Register(metrics.RegisterOpts{RequestRetry: retryCounter{}}) }

// Retries returns how many API-server requests this process retried.
func Retries() int64 { return apiRetries.Load() }
