package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// The configuration files of a node's daemons, written into its directory.

// containerdConfig is containerd v2's config (version 3) for one node: its
// own root, state, socket, CNI and registry directories, runc from Debian,
// cgroupfs, and the sandbox image from the tests' registry. Pod network
// namespaces live under its state directory, so a killed run's are found.
// restrict_oom_score_adj: root here may not lower oom_score_adj. NRI is
// off: its socket is one path for the whole machine (/var/run/nri), so two
// nodes starting at once failed with "address already in use".
func containerdConfig(d nodeDirs, sandboxImage string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins.'io.containerd.internal.v1.opt']
  path = %[5]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[7]q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[8]q
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "/usr/sbin/runc"
      Root = %[9]q
      SystemdCgroup = false
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, d.containerdRoot, d.containerdState, d.containerdSock, d.containerdSock+".ttrpc", d.opt, sandboxImage, d.certsD, d.cniConf, d.runc)
}

// cniConfig is the bridge network of a node's pods (range pods, network
// name, IP allocations kept in the node's directory), masqueraded on the
// way out (to the tests' namespace).
func cniConfig(d nodeDirs, name, pods string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, name, d.ipam, pods)
}

// kubeletConfig is the KubeletConfiguration of a node. cgroup v1 with
// cgroupfs (the machine has v1), a cgroup root and pod logs of its own
// (the kubelet's container GC removes every pod log directory it does not
// know), no DNS (pods get an empty resolv.conf: nothing to ask outside),
// anonymous AlwaysAllow on the kubelet API (reachable only inside the
// node's namespace), and eviction thresholds low enough for a shared test
// machine.
func kubeletConfig(d nodeDirs, nodeIP, cgroupRoot string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[2]s
cgroupsPerQOS: true
failSwapOn: false
containerRuntimeEndpoint: unix://%[3]s
resolvConf: %[4]s
podLogsDir: %[5]s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 4s
maxPods: 60
`, nodeIP, cgroupRoot, d.containerdSock, d.resolvConf, d.podLogs)
}

// kubeProxyConfig runs kube-proxy in iptables mode, without touching the
// machine-wide conntrack sysctls.
func kubeProxyConfig(kubeconfig, node, pods string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, node, pods)
}

// registryHosts tells containerd to pull from a registry over plain HTTP.
func registryHosts(d nodeDirs, host string) error {
	dir := filepath.Join(d.certsD, host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(toml), 0o644)
}
