package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ProbeDir is where the probes of a pre-flight check write, under the
// location's prefix: ProbeDir/<id>/, removed when the check ends.
const ProbeDir = "preflight-probes/"

// SubURL is location URL rawURL with its prefix (the prefix query
// parameter, which every scheme takes) extended by sub: a location inside
// the other, whose objects are the other's under sub.
func SubURL(rawURL, sub string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("backup storage location %q: not a URL", Redact(rawURL))
	}
	if sub == "" || strings.HasPrefix(sub, "/") || strings.HasPrefix(sub, "../") || !strings.HasSuffix(sub, "/") || path.Clean(sub)+"/" != sub {
		return "", fmt.Errorf("sub-prefix %q: a relative path ending in /", sub)
	}
	q := u.Query()
	q.Set("prefix", q.Get("prefix")+sub)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// DeleteUnder deletes every object whose key starts with prefix; none is
// no error.
func (l *Location) DeleteUnder(ctx context.Context, prefix string) error {
	it := l.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return l.describe("listing "+prefix, err)
		}
		if err := l.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return l.describe("deleting "+obj.Key, err)
		}
	}
}

// Keys lists the keys under prefix (a test's and a probe's view).
func (l *Location) Keys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := l.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, l.describe("listing "+prefix, err)
		}
		keys = append(keys, obj.Key)
	}
}

// SweepProbes deletes the probes under ProbeDir whose newest object is
// older than age (a pre-flight check that was killed left them; a live
// one writes within seconds) and returns how many objects it deleted.
func (l *Location) SweepProbes(ctx context.Context, age time.Duration) (int, error) {
	newest := map[string]time.Time{}
	var keys []string
	it := l.bucket.List(&blob.ListOptions{Prefix: ProbeDir})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, l.describe("listing "+ProbeDir, err)
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(obj.Key, ProbeDir), "/")
		if obj.ModTime.After(newest[id]) {
			newest[id] = obj.ModTime
		}
		keys = append(keys, obj.Key)
	}
	n := 0
	for _, k := range keys {
		id, _, _ := strings.Cut(strings.TrimPrefix(k, ProbeDir), "/")
		if time.Since(newest[id]) <= age {
			continue
		}
		if err := l.bucket.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return n, l.describe("deleting "+k, err)
		}
		n++
	}
	return n, nil
}
