// Package v1alpha1 is the hub's API, group ferry.dev, version v1alpha1: Cluster,
// ClusterCredential, Credential and Migration as clients see them (server
// mode's kinds are served at v1beta1 only: ferry.dev/v1alpha1 Backup,
// Restore, Schedule and BackupStorageLocation are server mode's CRDs). Its Migration names the clusters spec.sourceCluster and spec.targetCluster (v1beta1: spec.source.cluster, spec.target.cluster).
// See docs/design.md#the-hub.
//
// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/kubeferry/ferry/pkg/hub/apis/ferry
// +k8s:defaulter-gen=TypeMeta
// +groupName=ferry.dev
// +k8s:openapi-model-package=com.github.kubeferry.ferry.pkg.hub.apis.ferry.v1alpha1
package v1alpha1
