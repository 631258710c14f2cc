package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
)

// printObject prints v as JSON or YAML; table output is the caller's.
func printObject(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q", format)
}

// list wraps items in a kind: List document for -o json|yaml.
func list(items any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
}

// phaseExit turns a phase into an exit code error (nil for Completed).
func phaseExit(phase v1alpha1.Phase, what string) error {
	switch phase {
	case v1alpha1.PhaseCompleted:
		return nil
	case v1alpha1.PhasePartiallyFailed:
		return &exitError{code: ExitPartiallyFailed, msg: what + " partially failed"}
	default:
		return &exitError{code: ExitFailed, msg: what + " " + string(phase)}
	}
}
