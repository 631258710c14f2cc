package restore

import "testing"

func TestContains(t *testing.T) {
	existing := map[string]any{"spec": map[string]any{"a": int64(1), "defaulted": "x", "list": []any{map[string]any{"n": "p", "extra": true}}}}
	cases := []struct {
		desired map[string]any
		same    bool
		where   string
	}{
		{map[string]any{"spec": map[string]any{"a": float64(1)}}, true, ""},
		{map[string]any{"spec": map[string]any{"a": int64(2)}}, false, ".spec.a"},
		{map[string]any{"spec": map[string]any{"list": []any{map[string]any{"n": "p"}}}}, true, ""},
		{map[string]any{"spec": map[string]any{"list": []any{}}}, false, ".spec.list (0 items, target has 1)"},
		{map[string]any{"spec": map[string]any{"missing": nil, "empty": map[string]any{}}}, true, ""},
		{map[string]any{"spec": map[string]any{"new": "v"}}, false, ".spec.new"},
	}
	for i, c := range cases {
		same, where := contains(existing, c.desired, "")
		if same != c.same || (!same && where != c.where) {
			t.Errorf("case %d: contains = %v at %q, want %v at %q", i, same, where, c.same, c.where)
		}
	}
}

func TestOverlay(t *testing.T) {
	existing := map[string]any{"spec": map[string]any{"clusterIP": "10.0.0.1", "ports": []any{map[string]any{"port": int64(80), "nodePort": int64(30000)}}}}
	desired := map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(81)}}}}
	got := overlay(existing, desired).(map[string]any)["spec"].(map[string]any)
	p := got["ports"].([]any)[0].(map[string]any)
	if got["clusterIP"] != "10.0.0.1" || p["port"] != int64(81) || p["nodePort"] != int64(30000) {
		t.Errorf("overlay = %v", got)
	}
}
