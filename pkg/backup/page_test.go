package backup

import (
	"strings"
	"testing"
)

func TestParsePage(t *testing.T) {
	body := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"tok\u0065n"},
	  "items":[{"metadata":{"name":"a","namespace":"ns"},"data":{"k":"v"}},
	           {"data":{"x":"}{"},"metadata":{"namespace":"ns","name":"b\"q"}}]}`
	p, err := parsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if p.Continue != "token" || len(p.Items) != 2 {
		t.Fatalf("continue %q, %d items", p.Continue, len(p.Items))
	}
	if got := string(p.Items[0]); got != `{"metadata":{"name":"a","namespace":"ns"},"data":{"k":"v"}}` {
		t.Errorf("item 0 = %s", got)
	}
	for i, want := range []itemMeta{{Name: "a", Namespace: "ns"}, {Name: `b"q`, Namespace: "ns"}} {
		m, err := decodeMeta(p.Items[i])
		if err != nil || m != want {
			t.Errorf("decodeMeta(item %d) = %+v, %v; want %+v", i, m, err, want)
		}
	}
	cr, err := decodeMeta([]byte(`{"apiVersion":"x/v1","kind":"Gadget","metadata":{"name":"g"}}`))
	if err != nil || !cr.TypeMeta || cr.Name != "g" {
		t.Errorf("a custom resource's own apiVersion/kind not seen: %+v %v", cr, err)
	}
	empty, err := parsePage([]byte(`{"metadata":{},"items":null}`))
	if err != nil || len(empty.Items) != 0 || empty.Continue != "" {
		t.Errorf("empty page: %+v, %v", empty, err)
	}
	for _, bad := range []string{`[]`, `{"items":[{"metadata":`, `{"items":{}}`, `not json`} {
		if _, err := parsePage([]byte(bad)); err == nil {
			t.Errorf("parsePage(%q) accepted", bad)
		}
	}
	if _, err := decodeMeta([]byte(`{"data":{}}`)); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("an item without metadata: %v", err)
	}
}
