package images

import (
	"context"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	rules, err := ParseConfig([]byte(`images:
  a.io/shop/web: b.io/shop/web
  a.io/shop/api:1.0,1.1: b.io/shop/api
  a.io/shop/db:/^15\./: [b.io/shop/db, c.io/db]
  a.io/shop/job@` + dg + `: b.io/shop/job
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 4 || rules[1].Source != `a.io/shop/db:/^15\./` || len(rules[1].Targets) != 2 {
		t.Fatalf("rules = %+v", rules)
	}
	for _, tc := range []struct{ in, want string }{
		{"images: {}", "no entries"},
		{"imagez: {a.io/x: b.io/x}", "unknown field"},
		{"images: {a.io/x: 3}", "want a string or a list"},
		{"images: {a.io/x: [3]}", "want a string"},
		{"images: {'a.io/x:/(/': b.io/x}", "tag regex"},
		{"images: {'a.io/X': b.io/x}", `source "a.io/X"`},
		{"images: {'a.io/x:bad tag': b.io/x}", `tag "bad tag"`},
	} {
		if _, err := ParseConfig([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q): %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestExpandExplicit(t *testing.T) {
	c := NewCopier(Options{})
	tasks, failed := c.Expand(context.Background(), []Rule{
		{Source: "a.io/shop/api:1.0,1.1", Targets: []string{"b.io/shop/api", "c.io/api"}},
		{Source: "a.io/shop/job@" + dg, Targets: []string{"b.io/shop/job"}},
		{Source: "a.io/shop/one:7", Targets: []string{"b.io/shop/renamed:latest"}},
		{Source: "a.io/shop/two:1,2", Targets: []string{"b.io/shop/x:3"}},
		{Source: "a.io/shop/three:1", Targets: []string{"b.io/shop/x@" + dg}},
	})
	want := []Task{
		{"a.io/shop/api:1.0", "b.io/shop/api:1.0"}, {"a.io/shop/api:1.1", "b.io/shop/api:1.1"},
		{"a.io/shop/api:1.0", "c.io/api:1.0"}, {"a.io/shop/api:1.1", "c.io/api:1.1"},
		{"a.io/shop/job@" + dg, "b.io/shop/job@" + dg},
		{"a.io/shop/one:7", "b.io/shop/renamed:latest"},
	}
	if len(tasks) != len(want) {
		t.Fatalf("tasks = %v", tasks)
	}
	for i := range want {
		if tasks[i] != want[i] {
			t.Errorf("task %d = %v, want %v", i, tasks[i], want[i])
		}
	}
	if len(failed) != 2 || !strings.Contains(failed[0].Error, "names a tag, but the source") || !strings.Contains(failed[1].Error, "not a digest") {
		t.Errorf("failed = %+v", failed)
	}
}
