package cli

import (
	"errors"
	"regexp"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/backup"
	"github.com/kubeferry/ferry/pkg/store"
	"github.com/kubeferry/ferry/pkg/volumes"
)

// fieldFlags maps the spec fields the engine names in its errors
// (*field.Error, from k8s.io/apimachinery) to the CLI flags that set them.
// A path's subscripts are ignored: spec.namespaceMapping[a] matches
// spec.namespaceMapping.
var fieldFlags = map[string]string{
	// RestoreSpec
	"spec.existingResourcePolicy":   "--existing-resource-policy",
	"spec.crdTimeout":               "--crd-timeout",
	"spec.verify":                   "--verify",
	"spec.verifyRuntime.timeout":    "--verify-runtime-timeout",
	"spec.verifyRuntime.skip":       "--verify-runtime",
	"spec.dryRun":                   "--dry-run",
	"spec.existingVolumeDataPolicy": "--existing-volume-data-policy",
	"spec.fromCloud":                "--from-cloud",
	"spec.toCloud":                  "--to-cloud",
	"spec.resourceModifiers":        "--resource-modifiers",
	"spec.namespaceMapping":         "--namespace-mappings",
	"spec.pushImages":               "--push-images",
	// BackupSpec and RestoreSpec
	"spec.imageRegistryMappings": "--image-registry-mappings",
	// BackupSpec
	"spec.images":                  "--images",
	"spec.includeClusterResources": "--include-cluster-resources",
	"spec.labelSelector":           "--selector",
	"spec.storageLocationName":     "--storage-location",
	// Schedule
	"spec.schedule":                     "--schedule",
	"spec.ttl":                          "--ttl",
	"spec.template.storageLocationName": "--storage-location",
}

// textFlags are the flags of further spec fields that a pre-flight's
// risks name (fieldFlags' are named too).
var textFlags = map[string]string{
	"spec.storageClassMapping": "--storage-class-mappings",
	"spec.preserveNodePorts":   "--preserve-nodeports",
	"spec.excludedResources":   "--exclude-resources",
	"spec.includedNamespaces":  "--include-namespaces",
}

// flagText shows each spec field a flag sets in text (a pre-flight
// risk's what and fix) as "--flag (spec.field)".
func flagText(text string) string {
	return fieldPaths.ReplaceAllStringFunc(text, func(path string) string {
		flag, ok := fieldFlags[path]
		if !ok {
			flag, ok = textFlags[path]
		}
		if ok {
			return flag + " (" + path + ")"
		}
		return path
	})
}

// fieldPaths matches a spec field's path in an error's detail.
var fieldPaths = regexp.MustCompile(`\bspec(\.[a-zA-Z]+)+`)

// errorFlags names the flag that gives what an engine error says is
// missing, for errors that are about an input other than a spec field:
// the message of a wrapped sentinel is followed by the flag.
var errorFlags = []struct {
	err  error
	flag string
}{
	{backup.ErrNeedIdentity, "--encryption-identity FILE"},
	{store.ErrEncrypted, "--encryption-identity FILE"},
	{volumes.ErrNoPassword, "--repository-password-file FILE"},
}

// flagNames returns err with each *field.Error in its tree whose field a
// flag sets shown as "--flag (spec.field)", and each sentinel of
// errorFlags followed by its flag, so that a CLI user reads the flag
// where a server-mode user reads the spec field alone. The result wraps err:
// errors.Is and errors.As see what they saw before.
func flagNames(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	walkErrors(err, func(e error) {
		fe, ok := e.(*field.Error)
		if !ok {
			return
		}
		shown := *fe
		path, _, _ := strings.Cut(fe.Field, "[")
		if flag, ok := fieldFlags[path]; ok {
			shown.Field = flag + " (" + fe.Field + ")"
		}
		// Other fields the detail names ("spec.pushImages needs ...").
		shown.Detail = fieldPaths.ReplaceAllStringFunc(fe.Detail, func(f string) string {
			if flag, ok := fieldFlags[f]; ok {
				return flag
			}
			return f
		})
		if shown.Field != fe.Field || shown.Detail != fe.Detail {
			msg = strings.ReplaceAll(msg, fe.Error(), shown.Error())
		}
	})
	for _, ef := range errorFlags {
		if errors.Is(err, ef.err) {
			msg = strings.ReplaceAll(msg, ef.err.Error(), ef.err.Error()+" ("+ef.flag+")")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &flagError{msg: msg, err: err}
}

// flagError is an error whose message names flags for spec fields.
type flagError struct {
	msg string
	err error
}

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return e.err }

// walkErrors calls f on err and on every error it wraps, aggregates included.
func walkErrors(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, c := range e.Unwrap() {
			walkErrors(c, f)
		}
	case utilerrors.Aggregate:
		for _, c := range e.Errors() {
			walkErrors(c, f)
		}
	case interface{ Unwrap() error }:
		walkErrors(e.Unwrap(), f)
	}
}
