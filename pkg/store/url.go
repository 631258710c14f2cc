package store

import (
	"fmt"
	"net/url"
	"strings"
)

// ValidateURL checks a location URL without opening it: the scheme, a
// bucket or container name for the cloud schemes, no folder in place of
// a prefix, and a key prefix ferry can use (see checkPrefix). Open does
// the same first; `ferry install` uses it to refuse a location before
// rendering it.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("backup storage location %q: not a URL (want file:///dir, s3://bucket, gs://bucket, azblob://container)", Redact(raw))
	}
	if err := checkURL(u); err != nil {
		return fmt.Errorf("backup storage location %s: %w", Redact(raw), err)
	}
	return nil
}

// checkURL is ValidateURL on a parsed URL.
func checkURL(u *url.URL) error {
	what := map[string]string{"s3": "bucket", "gs": "bucket", "azblob": "container"}[u.Scheme]
	switch {
	case u.Scheme == "file":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return fmt.Errorf("a file URL needs an absolute path: file:///abs/dir")
		}
	case u.Scheme == "mem":
	case what == "":
		return fmt.Errorf("unknown scheme %q (want file, s3, gs or azblob)", u.Scheme)
	case u.Host == "":
		return fmt.Errorf("the URL names no %s: want %s://%s-name", what, u.Scheme, what)
	case strings.Trim(u.Path, "/") != "":
		article := map[string]string{"s3": "an", "gs": "a", "azblob": "an"}[u.Scheme]
		return fmt.Errorf("%s %s URL names a %s, not a folder: use %s://%s?prefix=%s/ for a key prefix", article, u.Scheme, what, u.Scheme, u.Host, strings.Trim(u.Path, "/"))
	}
	return checkPrefix(u.Query()["prefix"])
}

// checkPrefix refuses a key prefix that would not name a folder: ferry
// appends its keys (backups/...) to the prefix as it is, so prefix=team-x
// would write team-xbackups/..., a location apart from prefix=team-x/.
func checkPrefix(values []string) error {
	if len(values) > 1 {
		return fmt.Errorf("prefix is given %d times: give it once", len(values))
	}
	if len(values) == 0 || values[0] == "" {
		return nil
	}
	p := values[0]
	switch {
	case !strings.HasSuffix(p, "/"):
		return fmt.Errorf("prefix %q must end in /: prefix=%s/", p, p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("prefix %q must not start with /", p)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("prefix %q has an empty or . or .. segment", p)
		}
	}
	return nil
}
