package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The network of clusters with a node. The test process runs in a network
// namespace of its own (hack/netns-exec.sh, RequireConfinedNetwork): the
// tests' namespace. Each cluster with a node gets another namespace, its
// "cloud", joined to the tests' namespace by a veth pair:
//
//	tests' namespace                       cluster k's namespace
//	lo 127.0.0.1, HostIP/32                lo
//	ferryk 172.30.k.1/24  <--- veth --->   eth0 172.30.k.2/24 (node IP)
//	                                       default route via 172.30.k.1
//	                                       cni0 10.244.k.1/24 (pods)
//
// The control plane, containerd, kubelet, kube-scheduler and kube-proxy of
// cluster k all run in its namespace (nsenter --net). The registry and the S3
// server run in the tests' namespace and listen there on every address, so
// nodes and pods reach them at HostIP. The tests' namespace does not forward,
// so clusters have no path to each other, and nothing has a route out of the
// machine. Only loopback and these namespaces carry traffic.

// HostIP is the tests' namespace's address as nodes and pods see it.
const HostIP = "172.30.255.1"

var (
	hostNetOnce sync.Once
	hostNetErr  error
	//lint:ignore U1000 written only: it keeps the lock's file open for the process's lifetime
	nodesLock *os.File
	netnsMu   sync.Mutex
	netnsNext int
)

// netnsPrefix names this process's namespaces: hack/netns-exec.sh exports
// FERRY_NETNS (ferry-test-<its pid>), which its stale-namespace cleanup
// knows; the cluster namespaces are FERRY_NETNS-n<k>.
func netnsPrefix() (string, error) {
	p := os.Getenv("FERRY_NETNS")
	if p == "" || !strings.HasPrefix(p, "ferry-test-") {
		return "", fmt.Errorf("testenv: FERRY_NETNS is not set: clusters with a node start only under hack/netns-exec.sh (%s)", ConfinedNetworkHint)
	}
	return p, nil
}

// setupHostNet puts HostIP on the tests' namespace's lo, once, and turns
// forwarding off there (a new namespace may copy the machine's setting), so
// the clusters have no path to each other. Only one process of a tests'
// namespace may have nodes (their addresses and veths would clash): it
// holds a lock on /tmp/<FERRY_NETNS>.nodes for its lifetime.
func setupHostNet() error {
	hostNetOnce.Do(func() {
		if err := RequireConfinedNetwork(); err != nil {
			hostNetErr = err
			return
		}
		prefix, _ := netnsPrefix()
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), prefix+".nodes"), os.O_CREATE|os.O_RDWR, 0o600)
		if err == nil {
			err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		}
		if err != nil {
			hostNetErr = fmt.Errorf("testenv: another process of network namespace %s has clusters with a node (%v): run one test binary per namespace (go test -exec hack/netns-exec.sh)", prefix, err)
			return
		}
		nodesLock = lock // held until the process exits
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0o644); err != nil {
			hostNetErr = fmt.Errorf("testenv: turning forwarding off in the tests' namespace: %w", err)
			return
		}
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if strings.HasPrefix(a.String(), HostIP+"/") {
				return
			}
		}
		hostNetErr = run("ip", "addr", "add", HostIP+"/32", "dev", "lo")
	})
	return hostNetErr
}

// nodeNet is one cluster's network namespace and veth pair.
type nodeNet struct {
	name   string // namespace, FERRY_NETNS-n<k>
	veth   string // the tests' end, ferry<k>
	hostIP string // 172.30.k.1
	nodeIP string // 172.30.k.2
	pods   string // the pods' range, 10.244.k.0/24
}

// newNodeNet makes the next cluster namespace of this process.
func newNodeNet() (*nodeNet, error) {
	prefix, err := netnsPrefix()
	if err != nil {
		return nil, err
	}
	if err := setupHostNet(); err != nil {
		return nil, err
	}
	netnsMu.Lock()
	k := netnsNext
	netnsNext++
	netnsMu.Unlock()
	if k > 250 {
		return nil, fmt.Errorf("testenv: more than 250 clusters with a node in one test process")
	}
	n := &nodeNet{
		name:   prefix + "-n" + strconv.Itoa(k),
		veth:   "ferry" + strconv.Itoa(k),
		hostIP: fmt.Sprintf("172.30.%d.1", k),
		nodeIP: fmt.Sprintf("172.30.%d.2", k),
		pods:   fmt.Sprintf("10.244.%d.0/24", k),
	}
	if err := run("ip", "netns", "add", n.name); err != nil {
		return nil, err // not ours: leave it alone
	}
	steps := [][]string{
		{"ip", "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.name},
		{"ip", "addr", "add", n.hostIP + "/24", "dev", n.veth},
		{"ip", "link", "set", n.veth, "up"},
		{"ip", "-n", n.name, "link", "set", "lo", "up"},
		{"ip", "-n", n.name, "addr", "add", n.nodeIP + "/24", "dev", "eth0"},
		{"ip", "-n", n.name, "link", "set", "eth0", "up"},
		{"ip", "-n", n.name, "route", "add", "default", "via", n.hostIP},
		{"ip", "netns", "exec", n.name, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			n.remove()
			return nil, err
		}
	}
	return n, nil
}

// nsenter returns the command line that runs argv in the namespace.
func (n *nodeNet) nsenter(argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + n.name, "--"}, argv...)
}

// remove deletes the namespace (and with it both veth ends).
func (n *nodeNet) remove() error {
	if err := run("ip", "netns", "del", n.name); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}

// run runs a command and returns its output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
