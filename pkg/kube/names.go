package kube

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// ObjectName is <prefix>-<16 hex digits of the FNV-1a hash of key>, the
// prefix cut so that it stays a valid object name (253 characters).
func ObjectName(prefix, key string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	if len(prefix) > 230 {
		prefix = prefix[:230]
	}
	return fmt.Sprintf("%s-%016x", strings.TrimRight(prefix, "-."), h.Sum64())
}
