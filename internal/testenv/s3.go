package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Region is the region S3 URLs and Env use.
const S3Region = "us-east-1"

// S3 is a running versitygw S3 gateway (posix backend) on 127.0.0.1.
// Get one from StartS3; end it with Stop.
type S3 struct {
	// Endpoint is the base URL, "http://127.0.0.1:PORT".
	Endpoint string
	// NodeEndpoint is "http://HostIP:PORT", the same server as nodes and
	// pods of StartNodeClusters reach it; set only in a confined network
	// namespace (RequireConfinedNetwork), where versitygw then listens on
	// every address.
	NodeEndpoint string
	// AccessKey and SecretKey are the static credentials the server accepts.
	AccessKey, SecretKey string
	// Dir is the posix backend's root: one subdirectory per bucket, objects
	// as plain files.
	Dir string
	// LogPath receives versitygw's stdout and stderr.
	LogPath string

	tmp      string
	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// StartS3 starts "versitygw --access K --secret S --port 127.0.0.1:PORT
// --keep-alive posix DIR" on a free port, with fresh temporary DIR and
// credentials, and waits until it answers any HTTP request on "/" (timeout
// 20 s; typically 150 ms). versitygw comes from ToolsBinDir (which may install it first). If t is
// non-nil, t.Cleanup(Stop) is registered.
//
// Errors: ToolsBinDir failure, versitygw exiting early (the error quotes its
// log) or not answering in time. A port taken between choosing and binding
// is retried up to 3 times.
//
// --keep-alive: versitygw otherwise closes every connection after one
// request, which no real object store does; each of a restore's thousands
// of reads then paid a new TCP connection, and benchmarks measured that.
func StartS3(ctx context.Context, t testing.TB) (*S3, error) {
	if t != nil {
		t.Helper()
	}
	bin, err := ToolsBinDir()
	if err != nil {
		return nil, err
	}
	var s *S3
	for attempt := 0; attempt < 3; attempt++ {
		s, err = startS3(ctx, filepath.Join(bin, "versitygw"))
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		t.Cleanup(func() {
			if err := s.Stop(); err != nil {
				t.Logf("testenv: %v", err)
			}
		})
	}
	return s, nil
}

func startS3(ctx context.Context, path string) (_ *S3, err error) {
	tmp, err := os.MkdirTemp("", "ferry-testenv-s3-")
	if err != nil {
		return nil, fmt.Errorf("testenv: s3: %w", err)
	}
	s := &S3{
		AccessKey: "ferrytest",
		SecretKey: "ferrytestsecret",
		Dir:       filepath.Join(tmp, "data"),
		LogPath:   filepath.Join(tmp, "versitygw.log"),
		tmp:       tmp,
	}
	defer func() {
		if err != nil {
			_ = s.Stop()
			err = fmt.Errorf("testenv: s3: %w", err)
		}
	}()
	if err = os.Mkdir(s.Dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s.Endpoint = "http://" + addr
	if RequireConfinedNetwork() == nil {
		s.NodeEndpoint, addr = fmt.Sprintf("http://%s:%d", HostIP, port), fmt.Sprintf(":%d", port)
	}
	log, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child keeps its own descriptor
	s.cmd = exec.Command(path, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--keep-alive", "posix", s.Dir)
	s.cmd.Stdout = log
	s.cmd.Stderr = log
	s.cmd.Dir = tmp
	if err = s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s.done = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	return s, s.waitReady(ctx, 20*time.Second)
}

// waitReady polls GET / until any HTTP answer arrives.
func (s *S3) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("versitygw exited before answering on %s; log %s ends:\n%s", s.Endpoint, s.LogPath, tailFile(s.LogPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("versitygw not answering on %s: %w; log %s ends:\n%s", s.Endpoint, ctx.Err(), s.LogPath, tailFile(s.LogPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops versitygw (SIGTERM, SIGKILL after 5 s) and removes Dir and the
// log. Safe to call more than once; later calls return the first result.
func (s *S3) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = stopProcess("s3", s.cmd, s.done, s.tmp) })
	return s.stopErr
}

// stopProcess stops a server the tests started (SIGTERM, SIGKILL after
// 5 s; done closes when it has exited) and removes its folder tmp. The
// error names what (the registry, s3).
func stopProcess(what string, cmd *exec.Cmd, done chan struct{}, tmp string) error {
	if cmd != nil && cmd.Process != nil && done != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if tmp != "" {
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("stop %s: %w", what, err)
		}
	}
	return nil
}

// Client returns an AWS SDK v2 S3 client for this server (path-style
// addressing, static credentials, region us-east-1).
func (s *S3) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       S3Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// CreateBucket creates bucket name. Errors: invalid name, bucket exists, or
// the server is unreachable (errors from the AWS SDK, wrapped).
func (s *S3) CreateBucket(ctx context.Context, name string) error {
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("testenv: create bucket %q at %s: %w", name, s.Endpoint, err)
	}
	return nil
}

// URL returns the gocloud.dev blob URL of bucket:
// "s3://BUCKET?endpoint=http://127.0.0.1:PORT&use_path_style=true&region=us-east-1".
// Credentials are not in the URL; see Env.
func (s *S3) URL(bucket string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=%s", bucket, s.Endpoint, S3Region)
}

// Env returns "KEY=value" entries for a subprocess's environment (append
// them to os.Environ()): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_REGION=us-east-1. In-process, set them with t.Setenv instead.
func (s *S3) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + S3Region,
	}
}
