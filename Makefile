# ferry's make targets. `make demo` and `make test` are the quick start.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
TOOLS_BIN := $(or $(FERRY_TOOLS_BIN),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ferry/bin)
STATICCHECK_VERSION := v0.8.2
GOTESTSUM_VERSION := v1.13.0
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOTESTSUM := $(TOOLS_BIN)/gotestsum-$(GOTESTSUM_VERSION)
# The hub's API generators (pkg/hub/apis): k8s.io/code-generator at the
# version of the k8s.io modules, openapi-gen at go.mod's k8s.io/kube-openapi.
CODE_GENERATOR_VERSION := v0.37.2
KUBE_OPENAPI_VERSION := v0.0.0-20260721132016-d427ff9ee9ad
CODE_GENERATOR_BIN := $(TOOLS_BIN)/code-generator-$(CODE_GENERATOR_VERSION)
OPENAPI_GEN := $(TOOLS_BIN)/kube-openapi-$(KUBE_OPENAPI_VERSION)/openapi-gen
HUB_APIS := ./pkg/hub/apis/ferry/v1alpha1 ./pkg/hub/apis/ferry/v1beta1
GEN_HEADER := --go-header-file hack/boilerplate.go.txt
# Everything that starts a test cluster, registry or S3 server runs in a
# network namespace of its own with nothing but loopback (hack/netns-exec.sh).
NETNS_EXEC := $(CURDIR)/hack/netns-exec.sh

.PHONY: all build control-plane tools generate docs demo test unit lint bench fuzz clean image

all: build

build:
	$(GO) build -o $(BIN)/ferry ./cmd/ferry

# ferry's container image (internal/imagebuild): the static binary and
# Debian's busybox-static, built with go-containerregistry, no Docker.
# `make image IMAGE=host:5000/ferry:tag` pushes it (IMAGE_INSECURE=1 for a
# registry without TLS); plain `make image` writes an OCI layout to
# $(BIN)/ferry-image. The Dockerfile builds the same layout with Docker.
IMAGE ?=
OCI_LAYOUT ?= $(BIN)/ferry-image
image:
	hack/install-packages.sh busybox-static
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/linux/ferry ./cmd/ferry
	$(GO) run ./hack/image -ferry $(BIN)/linux/ferry $(if $(IMAGE),-push $(IMAGE) $(if $(IMAGE_INSECURE),-insecure),-oci-layout $(OCI_LAYOUT))

# The test control plane (etcd, kube-apiserver, kube-controller-manager built
# from Go modules), the test nodes (kubelet, kube-scheduler, kube-proxy,
# containerd; Debian's runc, CNI plugins, iptables: hack/build-node.sh) and
# the object-store servers (versitygw, fake-gcs-server, Azurite through npm),
# cached outside the clone (docs/design.md#test-infrastructure),
# and the Debian packages
# the tests use (hack/install-packages.sh).
control-plane:
	hack/build-control-plane.sh >/dev/null
	hack/build-node.sh >/dev/null
	hack/install-tools.sh >/dev/null
	hack/install-packages.sh

tools:
	@test -x $(TOOLS_BIN)/staticcheck || GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@test -x $(GOTESTSUM) || { GOBIN=$(TOOLS_BIN) $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION) && mv $(TOOLS_BIN)/gotestsum $(GOTESTSUM); }
	@test -x $(CONTROLLER_GEN) || { GOBIN=$(TOOLS_BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) && mv $(TOOLS_BIN)/controller-gen $(CONTROLLER_GEN); }
	@test -x $(CODE_GENERATOR_BIN)/conversion-gen || GOBIN=$(CODE_GENERATOR_BIN) $(GO) install $(foreach g,deepcopy-gen conversion-gen defaulter-gen,k8s.io/code-generator/cmd/$(g)@$(CODE_GENERATOR_VERSION))
	@test -x $(OPENAPI_GEN) || GOBIN=$(dir $(OPENAPI_GEN)) $(GO) install k8s.io/kube-openapi/cmd/openapi-gen@$(KUBE_OPENAPI_VERSION)

# Deepcopy functions and CRD YAML from pkg/apis/v1alpha1 (controller-gen);
# the hub's deepcopy, conversion, defaults (k8s.io/code-generator) and
# OpenAPI definitions (openapi-gen, into pkg/hub/openapi) from pkg/hub/apis.
# `make lint` fails when they are stale (hack/verify-generated.sh).
generate: tools
	$(CONTROLLER_GEN) object paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd paths=./pkg/apis/... output:crd:dir=config/crd
	$(CODE_GENERATOR_BIN)/deepcopy-gen $(GEN_HEADER) --output-file zz_generated.deepcopy.go ./pkg/hub/apis/ferry $(HUB_APIS)
	$(CODE_GENERATOR_BIN)/conversion-gen $(GEN_HEADER) --output-file zz_generated.conversion.go $(HUB_APIS)
	$(CODE_GENERATOR_BIN)/defaulter-gen $(GEN_HEADER) --output-file zz_generated.defaults.go $(HUB_APIS)
	$(OPENAPI_GEN) $(GEN_HEADER) --output-file zz_generated.openapi.go --output-dir pkg/hub/openapi \
	  --output-pkg github.com/kubeferry/ferry/pkg/hub/openapi --report-filename /dev/null \
	  --output-model-name-file zz_generated.model_name.go \
	  --readonly-pkg k8s.io/apimachinery/pkg/apis/meta/v1 --readonly-pkg k8s.io/apimachinery/pkg/runtime --readonly-pkg k8s.io/apimachinery/pkg/version --readonly-pkg k8s.io/api/core/v1 --readonly-pkg k8s.io/apimachinery/pkg/api/resource --readonly-pkg k8s.io/apimachinery/pkg/util/intstr \
	  k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/util/intstr k8s.io/api/core/v1 $(HUB_APIS)

# The command reference in docs/cli, one Markdown page per command, from
# the cobra tree (hack/gen-cli-docs). `make lint` fails when it is stale
# (hack/verify-cli-docs.sh).
docs:
	rm -rf docs/cli
	$(GO) run ./hack/gen-cli-docs -dir docs/cli

demo: control-plane build
	$(GO) run -exec $(NETNS_EXEC) ./test/demo -ferry $(BIN)/ferry

lint: tools
	hack/verify-generated.sh
	hack/verify-cli-docs.sh
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(TOOLS_BIN)/staticcheck ./...

unit:
	$(GO) test -short -count=1 -exec $(NETNS_EXEC) ./...

# Two streams side by side (hack/test.sh): the packages and the e2e tests
# on real nodes, and the other e2e tests; it ends with the slowest tests.
test: control-plane lint
	GO=$(GO) hack/test.sh $(GOTESTSUM) $(NETNS_EXEC)

bench: control-plane build
	$(GO) run -exec $(NETNS_EXEC) ./bench/resources

# The image benchmark (bench/images): ferry image sync vs skopeo sync
# between local docker-registry instances.
.PHONY: bench-images
bench-images: build
	hack/install-tools.sh >/dev/null
	$(GO) run -exec $(NETNS_EXEC) ./bench/images -ferry $(BIN)/ferry

# bench/volumes: pod volume backup and restore of a 2 GiB data set by
# ferry's engine and by the kopia CLI v0.22.3 (built into $(TOOLS_BIN) on
# first use), side by side.
.PHONY: bench-volumes
bench-volumes:
	$(GO) run ./bench/volumes -gib 2 -rounds 3

# bench/helperpods: backup and restore of a 2 GiB claim through ferry's
# helper pods, against the kopia CLI v0.22.3 run on the node over the same
# directory, side by side (one node cluster, registry and S3 server, in a
# network namespace of its own). The kopia CLI is built first, outside the
# namespace (it needs the module proxy once).
.PHONY: bench-helperpods
bench-helperpods: control-plane
	$(GO) run ./bench/helperpods -install-kopia
	$(GO) run -exec $(NETNS_EXEC) ./bench/helperpods -size 2GiB -rounds 3

# bench/cutover: a staged migration's cutover downtime against a
# stop-the-world migrate of the same 2 GiB namespace that keeps writing,
# and against its own prediction (two node clusters, registry and S3
# server, in a network namespace of its own).
.PHONY: bench-cutover
bench-cutover: control-plane
	$(GO) run -exec $(NETNS_EXEC) ./bench/cutover -size-mib 2048

# bench/hub: the hub's footprint (one process, etcd embedded) against
# kube-apiserver and etcd serving the same 1,000 Migration-sized objects:
# start to ready, idle RSS, RSS under a list/watch load.
.PHONY: bench-hub
bench-hub: control-plane build
	$(GO) run -exec $(NETNS_EXEC) ./bench/hub -ferry $(BIN)/ferry

# The load test (bench/load): a whole-cluster migration of 50,000 objects in
# 200 namespaces, timed against raw client-go LIST and CREATE references in
# the same run, with ferry's peak RSS (target < 512 MiB). load-large: the
# same with 200,000 objects (about an hour; two loaded clusters at a time).
.PHONY: load load-large
load: control-plane build
	$(GO) run -exec $(NETNS_EXEC) ./bench/load -ferry $(BIN)/ferry
load-large: control-plane build
	$(GO) run -exec $(NETNS_EXEC) ./bench/load -ferry $(BIN)/ferry -objects 200000 -out bench/results/load-large.json

# Each fuzz target for FUZZTIME (default 5m). Seed corpora and any crashers
# found live in pkg/*/testdata/fuzz and run with the normal tests.
FUZZTIME ?= 5m
fuzz:
	$(GO) test ./pkg/archive/ -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/archive/ -run '^$$' -fuzz '^FuzzParseManifest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/archive/ -run '^$$' -fuzz '^FuzzParseItemPath$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/modifiers/ -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/images/ -run '^$$' -fuzz '^FuzzRewrite$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf $(BIN)
