package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// csiPluginDir is the kubelet's folder for CSI volumes; their data is in
// the "mount" folder under the volume's own.
const csiPluginDir = "kubernetes.io~csi"

// dirName is the volume's folder name in the kubelet's layout: the
// PersistentVolume's name for a claim, the pod's volume name otherwise.
func (v PodVolume) dirName() (string, error) {
	if v.ClaimName == "" {
		return v.Volume, nil
	}
	if v.PVName == "" {
		return "", fmt.Errorf("volume %s: claim %s/%s is not bound to a PersistentVolume", v.Key(), v.Namespace, v.ClaimName)
	}
	return v.PVName, nil
}

// HostPath finds the data of volume v of pod podUID in a node's kubelet
// pods directory (/var/lib/kubelet/pods), laid out as the kubelet mounts
// it: <podsDir>/<pod UID>/volumes/<plugin>/<name>, where plugin is the
// escaped plugin name (kubernetes.io~csi, kubernetes.io~empty-dir, ...)
// and name the PersistentVolume's name for a claim or the volume's name;
// CSI volumes hold their data in its "mount" folder (Velero's node agent
// resolves it the same way). A missing folder is an error naming the
// pattern looked for.
func HostPath(podsDir, podUID string, v PodVolume) (string, error) {
	name, err := v.dirName()
	if err != nil {
		return "", err
	}
	if podUID == "" {
		return "", fmt.Errorf("volume %s: the pod has no UID", v.Key())
	}
	pattern := filepath.Join(podsDir, podUID, "volumes", "*", name)
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", err
	}
	var dirs []string
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.IsDir() {
			dirs = append(dirs, m)
		}
	}
	switch len(dirs) {
	case 0:
		return "", fmt.Errorf("volume %s: no volume directory %s (is the pod running on this node, and is %s the kubelet's pods directory?)", v.Key(), pattern, podsDir)
	case 1:
	default:
		return "", fmt.Errorf("volume %s: several volume directories match %s: %s", v.Key(), pattern, strings.Join(dirs, ", "))
	}
	dir := dirs[0]
	if filepath.Base(filepath.Dir(dir)) == csiPluginDir {
		dir = filepath.Join(dir, "mount")
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", fmt.Errorf("volume %s: CSI volume %s is not mounted (no %s)", v.Key(), dirs[0], dir)
		}
	}
	return dir, nil
}
