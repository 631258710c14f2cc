package cli

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/kubeferry/ferry/pkg/apis/v1alpha1"
	"github.com/kubeferry/ferry/pkg/images"
)

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Copy container images between registries"}
	cmd.AddCommand(newImageSyncCmd(g))
	return cmd
}

// imageFlags are the registry flags shared by image sync and the image
// modes of backup, restore and migrate.
type imageFlags struct {
	platforms []string
	// concurrencyFlag is the name the concurrency flag has on this command.
	concurrencyFlag string
	concurrency     int
	jobs            int
	retries         int
	insecure        bool
	referrers       []string
	limits          []string
}

// register adds the flags; concurrency names the images-at-once flag
// ("concurrency" for image sync, "image-concurrency" elsewhere).
func (f *imageFlags) register(cmd *cobra.Command, concurrency string) {
	fl := cmd.Flags()
	f.concurrencyFlag = concurrency
	fl.StringSliceVar(&f.platforms, "platform", nil, "keep only these platforms of multi-arch images (os/arch[/variant], repeatable); default the whole index")
	fl.IntVar(&f.concurrency, concurrency, 4, "images copied at once")
	fl.IntVar(&f.jobs, "image-jobs", 4, "blobs of one image moved at once")
	fl.IntVar(&f.retries, "image-retries", images.DefaultRetry.Attempts, "attempts per registry request (retried on 408, 429, 5xx, timeouts and resets, with jittered exponential backoff from 200ms, at most 5s)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow plain-HTTP registries and skip TLS verification")
	fl.StringSliceVar(&f.referrers, "referrers", []string{"all"}, "the referrers that travel with each image (signatures, attestations, SBOMs: OCI 1.1 referrers and cosign's .sig/.att/.sbom tags, an index's manifests' included): all, none, or artifact types (media types), comma-separated")
	fl.StringArrayVar(&f.limits, "registry-limit", nil, "bound the requests to a registry: HOST=CONCURRENCY[/QPS] (requests in flight, requests started per second; HOST * for every other registry), repeatable")
}

// validate checks that the flags make image options, without I/O.
func (f *imageFlags) validate() error {
	_, err := f.options()
	return err
}

func (f *imageFlags) options() (images.Options, error) {
	plats, err := images.ParsePlatforms(f.platforms)
	if err != nil {
		return images.Options{}, fmt.Errorf("--platform: %w", err)
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{f.concurrencyFlag, f.concurrency}, {"image-jobs", f.jobs}, {"image-retries", f.retries}} {
		if n.v < 1 {
			return images.Options{}, fmt.Errorf("--%s %d: must be at least 1", n.flag, n.v)
		}
	}
	refs, err := images.ParseReferrers(f.referrers)
	if err != nil {
		return images.Options{}, fmt.Errorf("--referrers: %w", err)
	}
	limits, err := images.ParseLimits(f.limits)
	if err != nil {
		return images.Options{}, fmt.Errorf("--registry-limit: %w", err)
	}
	r := images.DefaultRetry
	r.Attempts = f.retries
	return images.Options{Platforms: plats, Concurrency: f.concurrency, Jobs: f.jobs, Insecure: f.insecure, Retry: r, Referrers: refs, Limits: limits}, nil
}

// imageSyncOptions are image sync's.
type imageSyncOptions struct {
	*globals
	images                     imageFlags
	config, from, to, tagRegex string
	tags                       []string

	configRules []images.Rule // from --config
}

func newImageSyncCmd(g *globals) *cobra.Command {
	o := &imageSyncOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Copy images registry to registry, by digest, skipping what the target already has",
		Long: `Copy images between registries, many to many, from a config file or one --from/--to pair.

A source is a repository (every tag), repository:tag1,tag2, repository:/regex/
(tags matching an RE2 expression) or repository@sha256:... A target is a
repository (tags and digests are kept) or, for one tag, repository:tag.
Config file (YAML):

  images:
    registry.a.com/shop/web: registry.b.com/shop/web
    registry.a.com/shop/api:1.0,1.1: registry.b.com/shop/api
    registry.a.com/shop/db:/^15\./: [registry.b.com/shop/db, registry.c.com/db]

Credentials come from the docker config file ($DOCKER_CONFIG/config.json or
~/.docker/config.json) and its credential helpers.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.config, "config", "", "sync config file (YAML, images: {source: target}); see the command's help")
	fl.StringVar(&o.from, "from", "", "one source: repository, repository:tag, repository@digest")
	fl.StringVar(&o.to, "to", "", "the target of --from: repository, or repository:tag for one tag")
	fl.StringSliceVar(&o.tags, "tags", nil, "with --from REPOSITORY: these tags")
	fl.StringVar(&o.tagRegex, "tag-regex", "", "with --from REPOSITORY: the tags matching this RE2 regular expression")
	o.images.register(cmd, "concurrency")
	return cmd
}

// Complete reads the rules of --config.
func (o *imageSyncOptions) Complete(_ *cobra.Command, _ []string) error {
	if o.config == "" {
		return nil
	}
	data, err := os.ReadFile(o.config)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if o.configRules, err = images.ParseConfig(data); err != nil {
		return fmt.Errorf("--config %s: %w", o.config, err)
	}
	return nil
}

func (o *imageSyncOptions) Validate() error {
	if err := o.images.validate(); err != nil {
		return err
	}
	if (o.from == "") != (o.to == "") {
		return fmt.Errorf("--from and --to go together")
	}
	if o.from == "" && o.config == "" {
		return fmt.Errorf("give --config FILE or --from SRC --to DST")
	}
	switch {
	case o.from == "" && (len(o.tags) > 0 || o.tagRegex != ""):
		return fmt.Errorf("--tags and --tag-regex go with --from")
	case len(o.tags) > 0 && o.tagRegex != "":
		return fmt.Errorf("--tags and --tag-regex exclude each other")
	case len(o.tags) == 0 && o.tagRegex == "":
		return nil
	}
	if _, err := name.NewRepository(o.from); err != nil {
		return fmt.Errorf("--from %q: --tags and --tag-regex want a repository, without a tag or digest: %w", o.from, err)
	}
	if o.tagRegex != "" {
		if _, err := regexp.Compile(o.tagRegex); err != nil {
			return fmt.Errorf("--tag-regex %q: %w", o.tagRegex, err)
		}
	}
	return nil
}

// rules are --config's and the one of --from and --to.
func (o *imageSyncOptions) rules() []images.Rule {
	rules := o.configRules
	if o.from == "" {
		return rules
	}
	src := o.from
	switch {
	case len(o.tags) > 0:
		src = fmt.Sprintf("%s:%s", o.from, strings.Join(o.tags, ","))
	case o.tagRegex != "":
		src = fmt.Sprintf("%s:/%s/", o.from, o.tagRegex)
	}
	return append(rules, images.Rule{Source: src, Targets: []string{o.to}})
}

func (o *imageSyncOptions) Run(ctx context.Context) error {
	opts, err := o.images.options()
	if err != nil {
		return err
	}
	bars := newImageProgress(o.stderr)
	opts.OnProgress = bars.update
	opts.OnWait = func(host string, wait time.Duration) {
		o.log.Info("registry asked to wait (429 Too Many Requests, Retry-After)", "registry", host, "wait", wait)
	}
	c := images.NewCopier(opts)
	tasks, results := c.Expand(ctx, o.rules())
	results = append(results, c.CopyAll(ctx, tasks, func(r images.Result) {
		bars.done(r)
		o.log.Info("image", "source", r.Source, "target", r.Target, "outcome", r.Outcome, "digest", r.Digest, "blobBytes", r.BlobBytes, "retries", r.Retries, "referrers", len(r.Referrers), "error", r.Error)
		for _, ref := range r.Referrers {
			o.log.Info("referrer", "image", r.Target, "subject", ref.Subject, "digest", ref.Digest, "artifactType", ref.ArtifactType, "tag", ref.Tag, "outcome", ref.Outcome, "error", ref.Error)
		}
	})...)
	bars.stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if unmatched, found := c.UnmatchedTypes(); len(unmatched) > 0 {
		o.log.Warn("no referrer found has these artifact types of --referrers: misspelt?", "types", unmatched, "found", found)
	}
	if unused, used := c.UnusedLimits(); len(unused) > 0 {
		o.log.Warn("no request went to these hosts of --registry-limit, so their limits bounded nothing: misspelt, or another host name (docker.io is index.docker.io)?", "hosts", unused, "used", used)
	}
	return printImageResults(o.globals, results, c.Registries())
}

// printImageResults prints one line per image and returns the exit code
// error: 1 when every image failed, 2 when some did.
func printImageResults(g *globals, results []images.Result, registries []images.RegistryWaits) error {
	images.SortResults(results)
	if registries == nil {
		registries = []images.RegistryWaits{} // [] in JSON, not null
	}
	failed, refs := 0, 0
	var sent, retries, waits int64
	for _, r := range results {
		if r.Outcome == images.Failed {
			failed++
		}
		sent += r.BlobBytes
		retries += r.Retries
		waits += r.Waits
		refs += len(r.Referrers)
	}
	if g.output != "table" {
		out := map[string]any{"images": results, "failed": failed, "blobBytes": sent, "retries": retries, "referrers": refs, "waits": waits, "registries": registries}
		if err := printObject(g.stdout, g.output, out); err != nil {
			return err
		}
	} else {
		if err := printImageTable(g, results); err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "%d images (%d referrers), %d failed, %s of blobs sent, %d retries\n", len(results), refs, failed, humanBytes(sent), retries)
		for _, w := range registries {
			var said []string
			if w.Waits > 0 {
				said = append(said, fmt.Sprintf("asked to wait %d times (429 Too Many Requests), %.1fs in all", w.Waits, w.WaitSeconds))
			}
			if w.RateLimitRemaining != "" {
				said = append(said, fmt.Sprintf("its rate limit: %s remaining of %s", w.RateLimitRemaining, w.RateLimit))
			}
			fmt.Fprintf(g.stdout, "Registry %s %s\n", w.Host, strings.Join(said, "; "))
		}
	}
	switch {
	case failed == 0:
		return nil
	case failed == len(results):
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("image sync failed: %d of %d images", failed, len(results))}
	default:
		return &exitError{code: ExitPartiallyFailed, msg: fmt.Sprintf("image sync partially failed: %d of %d images", failed, len(results))}
	}
}

// printImageTable prints one row per image, its referrers under it,
// then the errors.
func printImageTable(g *globals, results []images.Result) error {
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tTARGET\tRESULT\tDIGEST\tSENT\tRETRIES")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.Source, orDash(r.Target), r.Outcome, orDash(r.Digest), humanBytes(r.BlobBytes), r.Retries)
		for _, ref := range r.Referrers {
			what := ref.ArtifactType
			if ref.Tag != "" {
				what = ref.Tag
			}
			fmt.Fprintf(tw, "  referrer %s\t%s\t%s\t%s\t\t\n", orDash(what), "of "+ref.Subject, orDash(string(ref.Outcome)), ref.Digest)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Outcome == images.Failed {
			fmt.Fprintf(g.stdout, "Error: %s\n", r.Error)
		}
	}
	return nil
}

// imageModeFlags are the image flags of backup create, restore create and
// migrate.
type imageModeFlags struct {
	imageFlags
	mode       string
	mappings   []string
	required   bool
	pushImages bool
}

const mappingsHelp = "image registry mappings OLD=NEW (a registry host[:port] or a repository prefix host/namespace), comma-separated or repeated"

func (f *imageModeFlags) registerBackup(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "images", images.ModeRecord, "what to do with the images the workloads name: none, record (resolve and record digests), copy (push to --image-registry-mappings targets) or bundle (store them under images/ in the backup storage location)")
	fl.BoolVar(&f.required, "images-required", false, "fail when an image cannot be resolved, copied, bundled or pushed (default: a warning, and the resources still go)")
}

func (f *imageModeFlags) registerMappings(cmd *cobra.Command, restore bool) {
	fl := cmd.Flags()
	help := mappingsHelp + "; with --images=copy, where the backup copies images to"
	if restore {
		help = mappingsHelp + ": rewrite every pod template's image references (tag kept, the recorded digest pinned)"
	}
	fl.StringSliceVar(&f.mappings, "image-registry-mappings", nil, help)
}

func (f *imageModeFlags) registerRestore(cmd *cobra.Command, withRequired bool) {
	fl := cmd.Flags()
	fl.BoolVar(&f.pushImages, "push-images", false, "push the images a --images=bundle backup holds to the --image-registry-mappings targets before restoring")
	if withRequired {
		fl.BoolVar(&f.required, "images-required", false, "fail the restore when an image cannot be pushed or rewritten (default: a warning, and the resources still go)")
	}
}

// checkPlatforms refuses --platform where it would filter nothing: it
// chooses the platforms an image copy keeps, so it needs --images=copy or
// bundle (record and none copy nothing; a restore pushes what the backup
// bundled).
func (f *imageModeFlags) checkPlatforms(restoreOnly bool) error {
	if len(f.platforms) == 0 {
		return nil
	}
	if restoreOnly {
		return fmt.Errorf("--platform applies when a backup copies or bundles images; a restore pushes the platforms its backup kept")
	}
	if f.mode != images.ModeCopy && f.mode != images.ModeBundle {
		return fmt.Errorf("--platform filters the images ferry copies; with --images=%s nothing is copied (use --images=copy or bundle)", f.mode)
	}
	return nil
}

// applyBackup puts the image flags into a backup spec.
func (f *imageModeFlags) applyBackup(spec *v1alpha1.BackupSpec) {
	spec.Images, spec.ImageRegistryMappings, spec.ImagesRequired = f.mode, f.mappings, f.required
}

// applyRestore puts the image flags into a restore spec.
func (f *imageModeFlags) applyRestore(spec *v1alpha1.RestoreSpec) {
	spec.ImageRegistryMappings, spec.PushImages, spec.ImagesRequired = f.mappings, f.pushImages, f.required
}
