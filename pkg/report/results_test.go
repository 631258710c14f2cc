package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestWriteJSON: the streamed results file holds what MarshalJSON gives
// (items sorted, warnings, errors, characters escaped alike).
func TestWriteJSON(t *testing.T) {
	for _, r := range []*Results{
		{},
		{Items: []Result{
			{Resource: "pods", Namespace: "b", Name: "p", Outcome: Created, Changes: []string{"<dropped> status"}},
			{Resource: "configmaps", Namespace: "a", Name: "c", Outcome: Failed, Message: "\"quoted\" & <tagged>\n"},
		}, Warnings: []string{"w1"}, Errors: []string{"e1", "e2"}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		var got, exp map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("WriteJSON wrote %q: %v", buf.String(), err)
		}
		_ = json.Unmarshal(want, &exp)
		if exp["items"] == nil {
			exp["items"] = []any{} // null and [] read back alike
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("WriteJSON:\n%s\nMarshalJSON:\n%s", buf.String(), want)
		}
		if strings.Contains(buf.String(), "<") {
			t.Errorf("HTML characters not escaped: %s", buf.String())
		}
	}
}
