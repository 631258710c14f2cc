// Command test-failures prints, from go test -json files, each failing test
// with the last lines of its own output: the closing lines of make test, so
// that a run whose log is cut to its tail still names what failed and why.
//
//	go run ./hack/test-failures FILE.json...
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// event is one line of go test -json (test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// keep is how many lines of a failing test's output are printed.
const keep = 6

func main() {
	failed := 0
	for _, file := range os.Args[1:] {
		n, err := report(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "test-failures:", err)
			os.Exit(1)
		}
		failed += n
	}
	if failed == 0 {
		fmt.Println("No failing test.")
	}
}

// report prints the failing leaf tests of one file and returns their count.
func report(file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	output := map[string][]string{}
	var failed []string
	parents := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line that is not an event (a build error)
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			line := strings.TrimRight(e.Output, "\n")
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "---") && !strings.HasPrefix(line, "=== ") {
				output[key] = append(output[key], line)
			}
		case "fail":
			failed = append(failed, key)
			if e.Test != "" {
				parents[e.Package+" "] = true // the package's own fail adds nothing
			}
			if i := strings.LastIndex(e.Test, "/"); i > 0 {
				parents[e.Package+" "+e.Test[:i]] = true
			}
		}
	}
	n := 0
	for _, key := range failed {
		if parents[key] {
			continue // its failing subtest is printed instead
		}
		n++
		fmt.Printf("FAILED %s\n", strings.TrimSpace(key))
		lines := output[key]
		if len(lines) > keep {
			lines = lines[len(lines)-keep:]
		}
		for _, l := range lines {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			fmt.Printf("    %s\n", strings.TrimSpace(l))
		}
	}
	return n, sc.Err()
}
