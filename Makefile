# vmvault — build, test, benchmark, lint and demo.
#
# `make test` is what CI runs (.ci/run): it installs the Debian packages the
# tests need when they are missing, then runs every test. Packages that run
# goroutines of their own are tested with -race.

GO       ?= go
BIN      ?= bin/appliance
PKGS     := $(shell $(GO) list ./... 2>/dev/null)
# Packages that run goroutines of their own, and every package below them,
# are tested with the race detector.
RACE_RE  := /(service|disk|internal/failpoint|repository|backup|dedup|policy|internal/state|internal/clock|internal/task|internal/auth|restore|web|daemon|vsphere|vcsim-tests|internal/cache|internal/directio)(/|$$)
RACE_PKGS := $(shell $(GO) list ./... 2>/dev/null | grep -E '$(RACE_RE)')
PLAIN_PKGS := $(filter-out $(RACE_PKGS),$(PKGS))

# Debian packages the tests need, keyed by the command that proves each is installed.
TEST_TOOLS := qemu-img:qemu-utils qemu-io:qemu-utils nfs-cat:libnfs-utils nfs-ls:libnfs-utils nfs-cp:libnfs-utils mkfs.ext4:e2fsprogs debugfs:e2fsprogs mkfs.vfat:dosfstools mcopy:mtools chromium:chromium systemd-analyze:systemd mkfs.xfs:xfsprogs pvcreate:lvm2 mkntfs:ntfs-3g ntfs-3g:ntfs-3g setfattr:attr getfattr:attr sgdisk:gdisk sfdisk:fdisk losetup:mount npx:npm mkfs.exfat:exfatprogs mount.exfat-fuse:exfat-fuse

# What `appliance demo` needs (see demo-deps).
DEMO_TOOLS := mkfs.ext4:e2fsprogs mkfs.vfat:dosfstools mcopy:mtools sgdisk:gdisk pvcreate:lvm2 mkfs.xfs:xfsprogs mkntfs:ntfs-3g ntfs-3g:ntfs-3g losetup:mount

.PHONY: all build test test-deps vet openapi-lint lint bench bench-deps demo demo-deps fuzz fuzz-smoke crashwalk clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/appliance

# scripts/test.sh runs the race run beside the fuzz smoke + plain run (each
# ends on one long package; side by side their tails overlap).
test: test-deps vet openapi-lint versitygw prism
	@printf '%s\n' $(RACE_PKGS) > .test-race-pkgs; printf '%s\n' $(PLAIN_PKGS) > .test-plain-pkgs
	GO=$(GO) FUZZ_SMOKE_TIME=$(FUZZ_SMOKE_TIME) scripts/test.sh .test-race-pkgs .test-plain-pkgs; rc=$$?; rm -f .test-race-pkgs .test-plain-pkgs; exit $$rc

# versitygw: the real S3 server the S3 tests (repository/s3store,
# internal/s3suite) start on loopback; built once (about 2 minutes) into a
# cache outside the tree, found by the tests through VMVAULT_VERSITYGW.
VERSITYGW_VERSION := v1.8.0
VERSITYGW := $(HOME)/.cache/vmvault/bin/versitygw
export VMVAULT_VERSITYGW := $(VERSITYGW)
.PHONY: versitygw
versitygw: $(VERSITYGW)
$(VERSITYGW):
	GOBIN=$(dir $(VERSITYGW)) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

# prism: Stoplight's validating proxy built from web/openapi.json; the
# contract test (vcsim-tests/contract) runs the demo's API through it and
# fails on any response the document does not describe. Installed once from
# the npm registry into a cache outside the tree, found through VMVAULT_PRISM.
PRISM_VERSION := 5.16.0
PRISM_DIR := $(HOME)/.cache/vmvault/prism-$(PRISM_VERSION)
PRISM := $(PRISM_DIR)/node_modules/.bin/prism
export VMVAULT_PRISM := $(PRISM)
.PHONY: prism
prism: $(PRISM)
$(PRISM): | test-deps
	mkdir -p $(PRISM_DIR) && npm install --silent --no-audit --no-fund --prefix $(PRISM_DIR) @stoplight/prism-cli@$(PRISM_VERSION)

# $(call install-missing,TOOLS) apt-get installs the packages of TOOLS
# (command:package) whose command is missing (fresh Debian, as root).
define install-missing
	@missing=""; for t in $(1); do \
		cmd=$${t%%:*}; pkg=$${t##*:}; \
		command -v $$cmd >/dev/null 2>&1 || [ -x /usr/sbin/$$cmd ] || [ -x /sbin/$$cmd ] || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing$(2):$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef

# Install what the tests shell out to, only when missing.
test-deps:
	$(call install-missing,$(TEST_TOOLS), test dependencies)
	@# QEMU's NFS block driver (service/instant's tests) is a module, not a command.
	@ls /usr/lib/*/qemu/block-nfs.so >/dev/null 2>&1 || { echo "installing test dependencies: qemu-block-extra"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-block-extra; }

# Only what `appliance demo` shells out to: its sample disks are made with
# mkfs.ext4 -d and mkfs.vfat + mcopy; app-01 (GPT+LVM+XFS) and win-01
# (GPT+NTFS), from --vms 4, also need sgdisk, LVM, mkfs.xfs, mkntfs, ntfs-3g
# and losetup. No Chromium, no systemd: those are for tests.
demo-deps:
	$(call install-missing,$(DEMO_TOOLS), demo dependencies)

vet:
	$(GO) vet ./...

# The published API document passes a third-party OpenAPI linter: no error,
# no warning but the deliberately invalid request examples. npx fetches the
# pinned linter from the npm registry once and keeps it in the npm cache.
REDOCLY := @redocly/cli@2.77.0
openapi-lint: test-deps
	npx --yes $(REDOCLY) lint --format=json web/openapi.json 2>/dev/null | node web/testdata/openapi-lint.mjs

# staticcheck comes from the Go module proxy; go vet always runs.
lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... || { echo "staticcheck unavailable or failed"; exit 1; }

bench-deps: test-deps
	@command -v restic >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq restic; }

# Micro-benchmarks of every package, then the end-to-end comparison with restic
# on generated VM-like images (see docs/PERFORMANCE.md).
bench: bench-deps build $(VERSITYGW)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2x ./dedup/... ./repository/... ./disk/... ./backup/...
	$(GO) test -run '^$$' -bench S3VsLocal -benchtime 1x ./internal/s3suite/
	scripts/bench.sh $(BIN)
	$(MAKE) bench-stages

# The stage table (docs/PERFORMANCE.md §13): each backup and restore stage's
# CPU-seconds per GB, alone and inside the pipeline, on make bench's images.
.PHONY: bench-stages
bench-stages: test-deps
	BENCH_ONLY=data scripts/bench.sh
	$(GO) test -run '^$$' -bench Stages -benchtime 1x -timeout 30m ./internal/benchstage/

# A lab vCenter with sample VMs (real ext4/FAT disks, so demo-deps), a
# repository, a job with a first backup, and the console on 127.0.0.1:8080.
# Flags: make demo DEMO_ARGS="--listen 127.0.0.1:9090 --state /tmp/vmvault-demo".
demo: build demo-deps
	$(BIN) demo $(DEMO_ARGS)

# The crash walk at scale (docs/RELIABILITY.md): SIGKILL backup, reclaim and
# recatalog at every failpoint x many hit counts; `make test` runs 1,000
# (and the S3 walk at first and last hits; S3HITS hit counts here).
# make crashwalk KILLS=20000 CRASHWALK_SEED=... reruns a seed.
KILLS ?= 5000
S3HITS ?= 6
# Rounds of the several-writers crash test (about 1.2 kills a round).
MWROUNDS ?= 500
crashwalk: $(VERSITYGW)
	CRASHWALK_KILLS=$(KILLS) S3CRASHWALK_HITS=$(S3HITS) $(GO) test -count=1 -timeout 120m -run '^TestCrashWalk' -v ./internal/crashtest/
	CRASHTEST_MW_KILLS=$(MWROUNDS) $(GO) test -count=1 -timeout 60m -run '^TestMultiWriterCrash$$' -v ./internal/crashtest/

# Every parser fuzz target (func Fuzz* in a _test.go) for FUZZTIME each,
# starting from its committed corpus in testdata/fuzz: `make fuzz` for a
# long run (60s each, FUZZTIME=10m make fuzz to dig deeper), `make
# fuzz-smoke` (1s each, which `make test` runs: the committed corpus
# replayed, then a second of new inputs) so a target that broke or a new
# crasher fails CI. The smoke budget: 52 targets, 225 s with 2s each on a
# cold cache (the instrumented binaries linked), so 1s each; scripts/fuzz.sh
# keeps the binaries in ~/.cache/vmvault/fuzzbin, keyed by build ID.
FUZZTIME ?= 60s
FUZZ_SMOKE_TIME ?= 1s
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

# A smoke run never flags a target SLOW: 1s includes the instrumented
# build's start-up, so rates are meaningless.
fuzz-smoke:
	FUZZ_MIN_RATE=0 scripts/fuzz.sh $(FUZZ_SMOKE_TIME)

clean:
	rm -rf bin
