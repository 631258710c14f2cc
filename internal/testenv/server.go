package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"
)

// listenAddrs returns the address a test server binds and the host part of
// its loopback and node URLs for port: "127.0.0.1:PORT" and no node host
// normally; in a confined network namespace (RequireConfinedNetwork) it
// binds every address (host "0.0.0.0"), so that nodes and pods reach it at HostIP,
// and nodeHost is "HostIP:PORT". As StartS3 does.
func listenAddrs(port int) (bindHost, loopback, nodeHost string) {
	loopback = fmt.Sprintf("127.0.0.1:%d", port)
	if RequireConfinedNetwork() == nil {
		return "0.0.0.0", loopback, fmt.Sprintf("%s:%d", HostIP, port)
	}
	return "127.0.0.1", loopback, ""
}

// startLogged starts cmd with stdout and stderr to a new file logPath; the
// returned channel closes when the process has exited.
func startLogged(cmd *exec.Cmd, logPath string) (chan struct{}, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child keeps its own descriptor
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return done, nil
}

// waitHTTP polls GET url until any HTTP answer arrives, for at most
// timeout. Errors name what, quote the end of logPath, and say whether the
// process exited (done closed) or did not answer in time.
func waitHTTP(ctx context.Context, what, url string, done chan struct{}, logPath string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before answering on %s; log %s ends:\n%s", what, url, logPath, tailFile(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not answering on %s: %w; log %s ends:\n%s", what, url, ctx.Err(), logPath, tailFile(logPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startWithRetries calls start up to 3 times (a port taken between choosing
// and binding), stopping early when ctx ends.
func startWithRetries[T any](ctx context.Context, start func() (T, error)) (T, error) {
	var s T
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		s, err = start()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	return s, err
}
