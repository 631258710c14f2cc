package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// Exec runs command in a container of a running pod, as kubectl exec does
// (client-go remotecommand, WebSocket with SPDY fallback), with stdin if
// non-nil, and returns what it printed. A non-zero exit is an error that
// carries stderr.
func Exec(ctx context.Context, cfg *rest.Config, namespace, pod, container string, stdin io.Reader, command ...string) (stdout, stderr string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: command,
			Stdin: stdin != nil, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", "", err
	}
	// As kubectl: fall back to SPDY only when the WebSocket upgrade itself
	// failed (a command that ran and failed must not run twice).
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", err
	}
	var out, errb bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err != nil {
		return out.String(), errb.String(), fmt.Errorf("testenv: exec %v in %s/%s: %w (stderr: %s)", command, namespace, pod, err, errb.String())
	}
	return out.String(), errb.String(), nil
}
