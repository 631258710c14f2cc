package hub_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kubeferry/ferry/pkg/hub"
	"github.com/kubeferry/ferry/pkg/hub/controller"
)

// TestReadyzControllers: a hub whose controller manager has stopped is
// not ready (/readyz fails, naming the check), and is ready again once
// the manager it starts anew runs.
func TestReadyzControllers(t *testing.T) {
	requireServers(t)
	h := startHub(t, hub.Options{DataDir: t.TempDir(), Controllers: &controller.Options{}})
	readyz := readyzOf(t, h)
	// startHub waited for /readyz, so the controllers run.
	if code, body := readyz(); code != http.StatusOK || !strings.Contains(body, "[+]ferry-hub-controllers ok") {
		t.Fatalf("a started hub: /readyz %d\n%s", code, body)
	}
	h.StopControllers()
	var code int
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		code, body = readyz()
		return code == http.StatusInternalServerError, nil
	})
	if err != nil || !strings.Contains(body, "[-]ferry-hub-controllers failed") {
		t.Fatalf("after the controller manager stopped: /readyz %d\n%s", code, body)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = readyz()
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the controllers did not start again: /readyz %d\n%s", code, body)
	}
}

// readyzOf GETs h's /readyz?verbose: the status code and the body.
func readyzOf(t *testing.T, h *runningHub) func() (int, string) {
	client, err := rest.HTTPClientFor(h.admin)
	if err != nil {
		t.Fatal(err)
	}
	return func() (int, string) {
		resp, err := client.Get(h.admin.Host + "/readyz?verbose")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
}

// TestRestartWaitsForRuns: a run that outlives its stopped controller
// manager still holds its lease under the process's identity, which a new
// manager would take as interrupted and end while it runs; the new one
// starts only once that run has ended.
func TestRestartWaitsForRuns(t *testing.T) {
	requireServers(t)
	runs := controller.NewRuns()
	h := startHub(t, hub.Options{DataDir: t.TempDir(), Controllers: &controller.Options{Runs: runs}})
	readyz := readyzOf(t, h)
	done := runs.Start() // a run of the first manager, still ending
	h.StopControllers()
	time.Sleep(3 * time.Second) // past the first restart's backoff (1 s)
	if code, body := readyz(); code != http.StatusInternalServerError || !strings.Contains(body, "[-]ferry-hub-controllers failed") {
		t.Fatalf("a stopped manager's run still going: /readyz %d, want the controllers not started again\n%s", code, body)
	}
	done()
	var code int
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = readyz()
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the run ended, the controllers did not start again: /readyz %d\n%s", code, body)
	}
}
