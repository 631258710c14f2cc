// Command hub benchmarks the footprint of ferry's hub, one process with
// etcd embedded, against kube-apiserver and etcd serving the same objects,
// side by side in one run.
//
// What is measured, for each server:
//
//   - start to ready: from starting the process(es) until /readyz answers
//     200 (the hub: `ferry hub --controllers=false`, a fresh data
//     directory; the reference: etcd and kube-apiserver from the test
//     control plane, started by envtest, which waits for both);
//   - idle RSS: the resident set (VmRSS) of the process(es), summed, once
//     1,000 Migration-sized objects are stored and nothing has been asked
//     for 5 seconds;
//   - RSS under load: the peak of that sum, sampled every 200 ms, while 8
//     clients list all 1,000 objects in a loop and 8 watches are open, for
//     15 seconds (the lists done are reported too).
//
// The objects are the same JSON on both: hub Migrations (kind Migration of
// ferry.dev/v1beta1, with their two Clusters), and on kube-apiserver
// objects of a CustomResourceDefinition of that kind (group
// bench.ferry.dev, spec and status preserved as given). Each object's
// spec is that of a Migration with a namespace selection, mappings and
// restore options, about 1 KiB.
//
// Run inside a network namespace of its own (make bench-hub does):
//
//	go run -exec hack/netns-exec.sh ./bench/hub -ferry bin/ferry
//
// A Markdown table goes to stdout, progress to stderr, and the result to
// bench/results/hub.json. Targets (issue 32): the hub's RSS under half of
// kube-apiserver's and etcd's, and a faster start.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeferry/ferry/bench/internal/benchutil"
	"github.com/kubeferry/ferry/internal/testenv"
)

const program = "bench/hub"

// footprint is one server's measurements.
type footprint struct {
	Server       string  `json:"server"`
	ReadySeconds float64 `json:"readySeconds"`
	IdleMiB      float64 `json:"idleRSSMiB"`
	LoadMiB      float64 `json:"loadRSSMiB"`
	Lists        int     `json:"listsUnderLoad"`
	Objects      int     `json:"objects"`
}

func main() {
	ferry := flag.String("ferry", "bin/ferry", "the ferry binary")
	objects := flag.Int("objects", 1000, "Migration-sized objects stored")
	out := flag.String("out", "bench/results/hub.json", "where the result goes")
	flag.Parse()
	if err := testenv.RequireConfinedNetwork(); err != nil {
		fail(err)
	}
	ctx := context.Background()
	hub, err := measureHub(ctx, *ferry, *objects)
	if err != nil {
		fail(fmt.Errorf("the hub: %w", err))
	}
	ref, err := measureKube(ctx, *objects)
	if err != nil {
		fail(fmt.Errorf("kube-apiserver and etcd: %w", err))
	}
	res := struct {
		Commit  string      `json:"commit"`
		Results []footprint `json:"results"`
		Ratios  ratios      `json:"ratios"`
	}{benchutil.GitCommit("."), []footprint{hub, ref}, ratiosOf(hub, ref)}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fail(err)
	}
	if err := benchutil.WriteJSON(*out, res); err != nil {
		fail(err)
	}
	printTable(hub, ref, res.Ratios)
}

// ratios are the hub's figures over the reference's.
type ratios struct {
	Ready float64 `json:"ready"`
	Idle  float64 `json:"idleRSS"`
	Load  float64 `json:"loadRSS"`
}

func ratiosOf(h, r footprint) ratios {
	return ratios{Ready: h.ReadySeconds / r.ReadySeconds, Idle: h.IdleMiB / r.IdleMiB, Load: h.LoadMiB / r.LoadMiB}
}

func printTable(h, r footprint, q ratios) {
	fmt.Printf("| server | start to ready | idle RSS | RSS under list/watch load | lists in 15 s |\n|---|---|---|---|---|\n")
	for _, f := range []footprint{h, r} {
		fmt.Printf("| %s | %.2f s | %.0f MiB | %.0f MiB | %d |\n", f.Server, f.ReadySeconds, f.IdleMiB, f.LoadMiB, f.Lists)
	}
	fmt.Printf("| hub ÷ reference | %.2f | %.2f | %.2f | |\n", q.Ready, q.Idle, q.Load)
}

func fail(err error) {
	benchutil.Logf(program, "%v", err)
	os.Exit(1)
}

// settle is how long nothing is asked before the idle RSS is read.
const settle = 5 * time.Second
