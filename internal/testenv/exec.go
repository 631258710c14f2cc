package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/kube"
)

// Exec runs command in a container of a running pod, as kubectl exec does
// (kube.Exec: WebSocket with SPDY fallback), with stdin if non-nil, and
// returns what it printed. A non-zero exit is an error that carries stderr
// (kube.ExitCode reads its code).
func Exec(ctx context.Context, cfg *rest.Config, namespace, pod, container string, stdin io.Reader, command ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = kube.Exec(ctx, cfg, namespace, pod, container, stdin, &out, &errb, command)
	if err != nil {
		return out.String(), errb.String(), fmt.Errorf("testenv: exec %v in %s/%s: %w (stderr: %s)", command, namespace, pod, err, errb.String())
	}
	return out.String(), errb.String(), nil
}
