package store

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestURLRefusals: location URLs that named no bucket, or a key prefix
// ferry would glue onto its keys, were accepted (a new user's findings):
// azblob:// with no container panicked in gocloud's listing; a folder in
// an azblob URL was dropped and the backup written at the container's
// root; prefix=team-x wrote team-xbackups/...; a repeated prefix kept the
// first. Each is refused before anything is opened, naming the fix.
func TestURLRefusals(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"azblob://?protocol=http&domain=127.0.0.1:1&localemu=true", "names no container"},
		{"gs://?endpoint=http://127.0.0.1:1", "names no bucket"},
		{"s3://?endpoint=http://127.0.0.1:1", "names no bucket"},
		{"azblob://ctr/team-a/sub?protocol=http&domain=127.0.0.1:1&localemu=true", "azblob://ctr?prefix=team-a/sub/"},
		{"gs://b/some/path?endpoint=http://127.0.0.1:1", "gs://b?prefix=some/path/"},
		{"s3://b?prefix=team-x&endpoint=http://127.0.0.1:1", `prefix "team-x" must end in /`},
		{"gs://b?prefix=gteam&endpoint=http://127.0.0.1:1", `prefix "gteam" must end in /`},
		{"s3://b?prefix=a/&prefix=b/&endpoint=http://127.0.0.1:1", "prefix is given 2 times"},
		{"s3://b?prefix=/x/&endpoint=http://127.0.0.1:1", "must not start with /"},
		{"s3://b?prefix=x//&endpoint=http://127.0.0.1:1", "empty or . or .. segment"},
		{"s3://b?prefix=../&endpoint=http://127.0.0.1:1", "empty or . or .. segment"},
	} {
		_, err := Open(context.Background(), c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): %v, want an error with %q", c.url, err, c.want)
		}
		if err := ValidateURL(c.url); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateURL(%s): %v, want an error with %q", c.url, err, c.want)
		}
	}
	for _, ok := range []string{"s3://b?prefix=team-x/", "gs://b?prefix=a/b/", "azblob://ctr?prefix=t/", "file:///tmp/x", "s3://b"} {
		if err := ValidateURL(ok); err != nil {
			t.Errorf("ValidateURL(%s): %v", ok, err)
		}
	}
}

// TestCheckDeadline: a server that accepts connections and never answers
// held `ferry backup get` until it was killed, for azblob and gs. Opening
// a location gives up after CheckTimeout and says it is unreachable.
func TestCheckDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	old := CheckTimeout
	CheckTimeout = 2 * time.Second
	defer func() { CheckTimeout = old }()
	addr := l.Addr().String()
	for _, u := range []string{
		"azblob://ctr?protocol=http&domain=" + addr + "&localemu=true",
		"gs://b?endpoint=http://" + addr,
	} {
		t.Setenv(EnvAzureStorageAccount, "devstoreaccount1")
		t.Setenv(EnvAzureStorageKey, "Zm9v")
		start := time.Now()
		_, err := Open(context.Background(), u)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Open(%s) took %s", u, took)
		}
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("Open(%s): %v, want unreachable", u, err)
		}
	}
}
