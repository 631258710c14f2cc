// Package ferry is the hub's API, group ferry.dev, in its internal
// version: the Go types every served version converts to and from
// (Cluster, ClusterCredential, Migration, BackupStorageLocation, Backup,
// Restore, Schedule). Nothing outside the hub's server
// and registry uses it; clients use a versioned package (v1alpha1, v1beta1).
// See docs/design.md#the-hub.
//
// +k8s:deepcopy-gen=package
// +groupName=ferry.dev
package ferry
