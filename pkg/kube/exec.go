package kube

import (
	"context"
	"errors"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// Exec runs command in container of a running pod, as kubectl exec does:
// client-go remotecommand over WebSocket, falling back to SPDY only when
// the WebSocket upgrade itself failed (an API server that does not speak
// it), so that a command that ran and failed never runs twice. stdin may
// be nil; stdout and stderr receive what the command prints (nil drops
// it). Cancelling ctx stops the stream and Exec returns ctx's error; the
// process in the container is not signalled and may go on running.
//
// A command that exited non-zero gives an error that ExitCode reads (a
// client-go utilexec.ExitError); other errors are those of the API server
// or the stream, not wrapped: the caller names the pod and command.
func Exec(ctx context.Context, cfg *rest.Config, namespace, pod, container string, stdin io.Reader, stdout, stderr io.Writer, command []string) error {
	if len(command) == 0 {
		return errors.New("kube: exec: no command")
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	req := core.RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: command,
			Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil,
		}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// ExitCode returns the exit code of a command that Exec ran and that
// exited non-zero, and false for any other error (or nil).
func ExitCode(err error) (int, bool) {
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), true
	}
	return 0, false
}
