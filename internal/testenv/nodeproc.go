package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeBins are the directories of the node's binaries (hack/build-node.sh).
type nodeBins struct{ k8s, containerd string }

// nodeBinaries returns the directories of the node's binaries, which
// hack/build-node.sh (make control-plane) builds and installs outside the
// tests' network namespace, where there is no network to build with.
func nodeBinaries() (nodeBins, error) {
	k8s, err := BinDir()
	if err != nil {
		return nodeBins{}, err
	}
	ctrd := os.Getenv("FERRY_CONTAINERD_BIN")
	if ctrd == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		ctrd = filepath.Join(cache, "ferry", "containerd", "v2.4.2")
	}
	need := map[string]string{
		k8s: "kubelet kube-scheduler kube-proxy", ctrd: "containerd containerd-shim-runc-v2",
		"/usr/sbin": "runc", "/usr/lib/cni": "bridge host-local loopback portmap",
	}
	for dir, names := range need {
		for _, n := range strings.Fields(names) {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				return nodeBins{}, fmt.Errorf("testenv: %s not found in %s: run hack/build-node.sh (make control-plane does)", n, dir)
			}
		}
	}
	return nodeBins{k8s: k8s, containerd: ctrd}, nil
}

var pauseBin struct {
	path string
	err  error
}

// pauseBinary builds internal/imagebuild/pause statically, once a process,
// to one path per user that each build replaces (rename: atomic).
func pauseBinary() (string, error) {
	if pauseBin.path != "" || pauseBin.err != nil {
		return pauseBin.path, pauseBin.err
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(nodeBase, fmt.Sprintf("ferry-testenv-pause-%d", os.Getuid()))
	tmp := fmt.Sprintf("%s.%d", p, os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "./internal/imagebuild/pause")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		pauseBin.err = fmt.Errorf("testenv: building the pause binary: %w: %s", err, out)
		return "", pauseBin.err
	}
	if err := os.Rename(tmp, p); err != nil {
		pauseBin.err = err
		return "", err
	}
	pauseBin.path = p
	return p, nil
}

// start starts containerd, the kubelet, kube-scheduler and kube-proxy.
func (n *Node) start(bins nodeBins, reg *Registry, kubeconfig string) error {
	d := n.dirs
	files := map[string]string{
		filepath.Join(d.root, "containerd.toml"):       containerdConfig(d, reg.NodeHost+"/"+SandboxImage),
		filepath.Join(d.cniConf, "10-bridge.conflist"): cniConfig(d, n.Netns, n.net.pods),
		d.resolvConf:                             "",
		filepath.Join(d.root, "kubelet.yaml"):    kubeletConfig(d, n.IP, n.cgroupRoot),
		filepath.Join(d.root, "kube-proxy.yaml"): kubeProxyConfig(kubeconfig, n.Name, n.net.pods),
	}
	for p, data := range files {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	if err := registryHosts(d, reg.NodeHost); err != nil {
		return err
	}
	if err := makeCgroups(n.cgroupRoot); err != nil {
		return err
	}
	path := "PATH=" + bins.containerd + ":/usr/sbin:/usr/bin:/sbin:/bin"
	if err := n.startDaemon("containerd", []string{filepath.Join(bins.containerd, "containerd"), "--config", filepath.Join(d.root, "containerd.toml")}, path); err != nil {
		return err
	}
	if err := waitFile(d.containerdSock, 30*time.Second, n.daemons[0]); err != nil {
		return err
	}
	k := bins.k8s
	start := [][]string{
		{"kubelet", filepath.Join(k, "kubelet"), "--config", filepath.Join(d.root, "kubelet.yaml"), "--kubeconfig", kubeconfig,
			"--root-dir", d.kubelet, "--cert-dir", d.kubeletCerts, "--hostname-override", n.Name, "--node-ip", n.IP, "--v=1"},
		{"kube-scheduler", filepath.Join(k, "kube-scheduler"), "--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
			"--authorization-kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10259"},
		{"kube-proxy", filepath.Join(k, "kube-proxy"), "--config", filepath.Join(d.root, "kube-proxy.yaml")},
	}
	for _, s := range start {
		if err := n.startDaemon(s[0], s[1:], path); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) startDaemon(name string, argv []string, env ...string) error {
	p, err := startDaemon(name, filepath.Join(n.LogDir, name+".log"), n.dirs.root, n.net.nsenter(argv...), env)
	if err != nil {
		return err
	}
	n.daemons = append(n.daemons, p)
	return nil
}

// waitFile waits for path to appear while d runs.
func waitFile(path string, timeout time.Duration, d *daemon) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if d.exited() {
			return fmt.Errorf("%s exited (%v); log %s ends:\n%s", d.name, d.err, d.logPath, tailFile(d.logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not there after %s", d.name, path, timeout)
}

// stopDaemons ends the node's daemons, newest first.
func (n *Node) stopDaemons() error {
	var errs []string
	for i := len(n.daemons) - 1; i >= 0; i-- {
		if err := n.daemons[i].stop(10 * time.Second); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// The pods' processes go too, before the control plane stops: the API
	// server would otherwise wait for their open requests.
	killPIDs(cgroupPIDs(n.cgroupRoot))
	if len(errs) > 0 {
		return fmt.Errorf("node %s: %s", n.Name, strings.Join(errs, "; "))
	}
	return nil
}

// killPIDs sends SIGKILL to each process.
func killPIDs(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// cgroupHierarchies are the cgroup v1 controller directories a node uses.
func cgroupHierarchies() []string {
	var dirs []string
	for _, c := range []string{"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb", "memory", "net_cls", "net_prio", "perf_event", "pids", "systemd", "unified"} {
		p := filepath.Join("/sys/fs/cgroup", c)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// makeCgroups creates the kubelet's cgroup root in every hierarchy (the
// kubelet refuses a root that does not exist), with cpuset's cpus and mems
// copied from the parent.
func makeCgroups(root string) error {
	for _, h := range cgroupHierarchies() {
		p := filepath.Join(h, root)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("testenv: cgroup %s: %w", p, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err == nil {
					_ = os.WriteFile(filepath.Join(p, f), v, 0o644)
				}
			}
		}
	}
	return nil
}

// reapNode removes what a node (running, stopped or of a killed run) has
// left: processes in its cgroups and network namespace (killed by PID),
// mounts under dir, its cgroups, the namespace and dir.
func reapNode(netns, dir string) error {
	for round := 0; round < 5; round++ {
		pids := append(cgroupPIDs("/"+netns), netnsPIDs(netns)...)
		if len(pids) == 0 {
			break
		}
		killPIDs(pids)
		time.Sleep(300 * time.Millisecond)
	}
	var errs []string
	for _, m := range mountsUnder(dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", m, err))
		}
	}
	removeCgroups("/" + netns)
	removeHostFiles(netns, dir)
	if _, err := os.Stat("/run/netns/" + netns); err == nil {
		if err := run("ip", "netns", "del", netns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if m := mountsUnder(dir); len(m) > 0 {
		// Never remove through a mount (a hostPath volume's bind mount
		// would take the machine's files with it).
		errs = append(errs, fmt.Sprintf("still mounted, %s left: %v", dir, m))
	} else if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("testenv: cleaning up %s: %s", netns, strings.Join(errs, "; "))
	}
	return nil
}

// removeHostFiles removes what a node leaves in the machine's fixed paths:
// CNI result caches of its network (named after netns) and the kubelet's
// /var/log/containers links into its pod logs.
func removeHostFiles(netns, dir string) {
	results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", netns+"-*"))
	for _, r := range results {
		_ = os.Remove(r)
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if t, err := os.Readlink(l); err == nil && strings.HasPrefix(t, dir+"/") {
			_ = os.Remove(l)
		}
	}
}

// cgroupPIDs lists the processes in root and below, in every hierarchy.
func cgroupPIDs(root string) []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for p := range seen {
		pids = append(pids, p)
	}
	return pids
}

// netnsPIDs lists the processes in network namespace name.
func netnsPIDs(name string) []int {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			ms = append(ms, mp)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i]) > len(ms[j]) })
	return ms
}

// removeCgroups removes root and its children in every hierarchy, deepest
// first.
func removeCgroups(root string) {
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// reapStale cleans up after the nodes of runs that were killed: every
// ferry-test-<pid>-n<k> (a directory in /tmp, a cgroup, a network
// namespace) whose hack/netns-exec.sh (pid) is gone.
func reapStale() {
	var found []string
	for _, dir := range append([]string{nodeBase, "/run/netns"}, cgroupHierarchies()...) {
		m, _ := filepath.Glob(filepath.Join(dir, "ferry-test-*-n*"))
		found = append(found, m...)
	}
	seen := map[string]bool{}
	for _, p := range found {
		name := filepath.Base(p)
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "ferry-test-"), "-", 2)[0])
		if err != nil || seen[name] || scriptAlive(pid) {
			continue
		}
		seen[name] = true
		if err := reapNode(name, filepath.Join(nodeBase, name)); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
}

// scriptAlive tells whether pid is a running hack/netns-exec.sh (a bash
// whose command line names the script: its comm is "bash").
func scriptAlive(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), "netns-exec.sh")
}
