package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeferry/ferry/pkg/backup"
)

func TestFlagNames(t *testing.T) {
	policy := func() error {
		return field.NotSupported(field.NewPath("spec", "existingResourcePolicy"), "merge", []string{"none", "update"})
	}
	unmapped := func() error { return field.Required(field.NewPath("spec", "noSuchField"), "") }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"wrapped", fmt.Errorf("restore r1: %w", policy()),
			`restore r1: --existing-resource-policy (spec.existingResourcePolicy): Unsupported value: "merge": supported values: "none", "update"`},
		{"joined", errors.Join(errors.New("first"), policy()),
			"first\n" + `--existing-resource-policy (spec.existingResourcePolicy): Unsupported value: "merge": supported values: "none", "update"`},
		{"aggregate", field.ErrorList{policy().(*field.Error)}.ToAggregate(),
			`--existing-resource-policy (spec.existingResourcePolicy): Unsupported value: "merge": supported values: "none", "update"`},
		{"no flag for the field", unmapped(), "spec.noSuchField: Required value"},
		{"subscripts", fmt.Errorf("%w", field.Invalid(field.NewPath("spec", "namespaceMapping").Key("b"), "m", "a is mapped to m too")),
			`--namespace-mappings (spec.namespaceMapping[b]): Invalid value: "m": a is mapped to m too`},
		{"with a cause", fmt.Errorf("%w: %w", field.Invalid(field.NewPath("spec", "toCloud"), "oracle", ""), errors.New(`unknown cloud "oracle"`)),
			`--to-cloud (spec.toCloud): Invalid value: "oracle": unknown cloud "oracle"`},
		{"sentinel", fmt.Errorf("backup %q is encrypted: %w", "b", backup.ErrNeedIdentity),
			`backup "b" is encrypted: no age identity given (--encryption-identity FILE)`},
		{"not a field error", errors.New("plain"), "plain"},
		{"fields in the detail", field.Required(field.NewPath("spec", "imageRegistryMappings"), "spec.pushImages needs them; spec.imagesRequired is not spec.images"),
			"--image-registry-mappings (spec.imageRegistryMappings): Required value: --push-images needs them; spec.imagesRequired is not --images"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flagNames(tc.err).Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	// The cause is kept.
	cause := errors.New("cause")
	err := flagNames(fmt.Errorf("%w: %w", cause, policy()))
	var fe *field.Error
	if !errors.Is(err, cause) || !errors.As(err, &fe) || fe.Field != "spec.existingResourcePolicy" {
		t.Errorf("flagNames lost the wrapped errors of %v", err)
	}
}

// TestFieldFlagsExist: every flag the tables name is a flag of some command.
func TestFieldFlagsExist(t *testing.T) {
	flags := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { flags["--"+f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { flags["--"+f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRoot(io.Discard, io.Discard))
	for field, flag := range fieldFlags {
		if !flags[flag] {
			t.Errorf("fieldFlags[%q] = %q: no command has that flag", field, flag)
		}
	}
	for _, ef := range errorFlags {
		if name, _, _ := strings.Cut(ef.flag, " "); !flags[name] {
			t.Errorf("errorFlags: %q: no command has that flag", ef.flag)
		}
	}
}
