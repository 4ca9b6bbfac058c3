# The commands of the README. Each installs what it needs (Debian packages, as root) first.
JOBS ?= 2
DEV := build/dev

.PHONY: all deps build run test test-dev test-asan test-tsan build-dev build-dev-suite build-asan build-tsan check-dev \
	check-dev-parallel check-dev-serial check-asan check-tsan test-fuzz flake-hunt bench chaos fuzz fuzz-run \
	stack stack-down lab format clean deb install

all: build

deps:
	@scripts/install-deps.sh build

build: deps
	cmake --preset dev >/dev/null
	cmake --build $(DEV) -j$(JOBS) --target sluice
	@echo "built $(DEV)/sluice"

run: build
	$(DEV)/sluice serve --listen 127.0.0.1:8080 --data-dir ./sluice-data

# Everything: integration, scenario, stack, browser and backend tests on the dev build, and the
# image and the compose fleet under podman (their bases kept between runs); then the
# unit tests (the highlighter's worker pool included), every fuzz target's corpus and its mutations
# (fuzz/replay_main.cc) and the server's API and hostile-input suites under AddressSanitizer+UBSan;
# then the admission library and the worker pool under ThreadSanitizer. Coverage-guided fuzzing
# (clang, libFuzzer) is `make fuzz`. `make test` is held to 25 minutes on 2 cores, so each stage
# prints its wall time. The two sanitizer builds are most of a cold run's CPU (bench/results/
# make-test.md), so they compile from the end of the dev build to the end of the dev suites, beside
# the tests (scripts/aside.sh: a session of their own, so that one kill stops them, in the idle
# class at autogroup nice 19; their log is build/sanitizer-builds.log). First come the tests
# labelled `serial` (open-loop load generators, the stack), which mostly wait on their schedules
# and servers: beside them the builds stay off the first CPU, because a VM whose every CPU is busy
# loses whole 100 ms periods to its host whatever the guest's priorities say, and a scenario's load
# generator 100 ms late is a failed run. Then the parallel part, beside which the builds get every
# CPU and autogroup nice 0, up to half the machine: its suites run patient servers
# (tests/lib/sluice_harness.py) that the flake hunt found holding under two CPU hogs and a syncing
# disk writer at full priority. The compose test's services image (Debian's PostgreSQL, Redis and
# nginx by mmdebstrap, minutes on a cold machine) is built aside the same way from the start, since
# it needs nothing compiled (build/image-bases.log; a failure there is the compose test's to report).
test:
	@$(STAGE_CLOCK) set -e; \
	scripts/install-deps.sh test; \
	echo "== $@: dependencies in $$(( $$(date +%s) - start )) s"; \
	$(MAKE) --no-print-directory build-dev-suite; \
	scripts/aside.sh start $(MAKE) --no-print-directory build-asan build-tsan >build/sanitizer-builds.log 2>&1 & \
	builds=$$!; \
	if command -v podman >/dev/null && command -v mmdebstrap >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  scripts/aside.sh start env PODMAN_RUNTIME=runc scripts/build-image.sh services >build/image-bases.log 2>&1 & \
	fi; \
	$(MAKE) --no-print-directory check-dev-serial || { kill -TERM -- -$$builds 2>/dev/null; exit 1; }; \
	scripts/aside.sh widen $$builds; \
	$(MAKE) --no-print-directory check-dev-parallel || { kill -TERM -- -$$builds 2>/dev/null; exit 1; }; \
	echo "== $@: waiting for the sanitizer builds at $$(( $$(date +%s) - start )) s"; \
	wait $$builds || { tail -60 build/sanitizer-builds.log; exit 1; }; \
	grep '^== ' build/sanitizer-builds.log; \
	$(MAKE) --no-print-directory check-asan check-tsan

# Each suite alone: test-dev, test-asan, test-tsan (build, then run); build-X and check-X do half.
test-dev test-asan test-tsan: test-%:
	@$(MAKE) --no-print-directory build-$* check-$*

STAGE_CLOCK = start=$$(date +%s); trap 'echo "== $@: $$(( $$(date +%s) - start )) s"' EXIT;
build-dev:
	@$(STAGE_CLOCK) cmake --preset dev >/dev/null && cmake --build $(DEV) -j$(JOBS)

# make test's dev stage leaves the gtest unit, admission, highlight and codec binaries to the sanitizer
# builds, which run their tests (check-asan, check-tsan): CMakeLists.txt, dev_suite.
SANITIZED_GTESTS := unit|admission|highlight|codec|sqlite|logging
build-dev-suite:
	@$(STAGE_CLOCK) cmake --preset dev >/dev/null && cmake --build $(DEV) -j$(JOBS) --target dev_suite

# CTEST_EXTRA reaches every check-X's ctest: tests/flake_hunt.py passes -R and --output-junit through it.
CTEST_EXTRA ?=

# The server suites labelled server_under_sanitizers (CMakeLists.txt) run on the sanitized server
# (check-asan), not twice: SLUICE_DEV_ALL=1 runs them on the dev build too. check-dev is both halves.
DEV_SKIP := $(if $(SLUICE_DEV_ALL),,server_under_sanitizers)
check-dev:
	@$(STAGE_CLOCK) ctest --test-dir $(DEV) --output-on-failure -j$(JOBS) \
	  $(if $(DEV_SKIP),-LE '$(DEV_SKIP)') $(CTEST_EXTRA)

# The parallel stage's suites mostly wait on their servers, timers and browsers: at -j2 they used
# about a third of the two cores (bench/results/make-test.md), so one more runs at a time.
PARALLEL_TESTS ?= $(shell echo $$(( $(JOBS) + 1 )))
check-dev-parallel:
	@$(STAGE_CLOCK) ctest --test-dir $(DEV) --output-on-failure -j$(PARALLEL_TESTS) \
	  -LE '$(if $(DEV_SKIP),$(DEV_SKIP)|)serial|$(SANITIZED_GTESTS)' -E '_NOT_BUILT$$' $(CTEST_EXTRA)

check-dev-serial:
	@$(STAGE_CLOCK) ctest --test-dir $(DEV) --output-on-failure -L serial $(CTEST_EXTRA)

build-asan:
	@$(STAGE_CLOCK) cmake --preset asan >/dev/null && cmake --build build/asan -j$(JOBS) \
	  --target sanitized_suite

# The server itself under the sanitizers too: the API contract, the hostile-input suite and the
# concurrent views in every language, each report failing the test (tests/lib/sluice_harness.py).
check-asan:
	@$(STAGE_CLOCK) ctest --test-dir build/asan --output-on-failure -j$(JOBS) \
	  -L 'unit|admission|highlight|codec|sqlite|logging|push|fuzz|server_under_sanitizers' $(CTEST_EXTRA)

build-tsan:
	@$(STAGE_CLOCK) cmake --preset tsan >/dev/null && cmake --build build/tsan -j$(JOBS)

check-tsan:
	@$(STAGE_CLOCK) ctest --test-dir build/tsan -L 'admission|highlight|codec|sqlite|logging|push' --output-on-failure $(CTEST_EXTRA)

# RUNS whole-suite runs in a row (make test's check stages, on trees built once), quiet or with LOAD=1
# (stress-ng on every core and the disk), then the table of every test that failed and why; the
# runs add up in bench/work/flake-hunt/ (tests/flake_hunt.py; TESTS=REGEX hunts in a part).
RUNS ?= 1
LOAD ?=
TESTS ?=
flake-hunt:
	@scripts/install-deps.sh hunt
	@$(MAKE) --no-print-directory build-dev-suite build-asan build-tsan
	tests/flake_hunt.py --runs $(RUNS) $(if $(filter 1,$(LOAD)),--load) $(if $(TESTS),--tests '$(TESTS)')

# Each writes its figures, with the machine's description, to bench/results/.
bench:
	@scripts/install-deps.sh bench
	bench/run_admission_bench.sh
	bench/run_embedded_bench.sh
	bench/hot_read_vs_nginx.sh
	bench/run_shed_bench.sh
	bench/run_stack_bench.sh

# The scale-out stack on loopback (PostgreSQL, Redis, s3rver, STACK_PROCESSES sluice processes, nginx,
# Varnish) until Ctrl-C; stack-down stops one started in the background by scripts/stack.sh up.
# HA=1: PostgreSQL primary + synchronous standby on a multi-host URL, failed over by hand, and Redis
# under three sentinels; HA=patroni: PostgreSQL under Patroni instead, which fails over by itself
# (docs/scale-out.md, "The HA stack"). S3=ceph: the bodies on Ceph RGW (a one-node cluster,
# scripts/testenv/ceph-rgw.sh) instead of s3rver.
STACK_PROCESSES ?= 2
HA ?=
S3 ?= s3rver
stack: build
	@scripts/install-deps.sh test
	scripts/stack.sh up --foreground --processes $(STACK_PROCESSES) $(if $(filter 1,$(HA)),--ha) \
	  $(if $(filter patroni,$(HA)),--ha --patroni) --s3 $(S3)

stack-down:
	scripts/stack.sh down

# Long versions of the scenario tests (the short ones run in make test), figures written to
# bench/results/scenarios.md, then slowhttptest's three attacks at 1,000 connections and 200/s each
# (probe figures appended to bench/work/slowhttp-long.jsonl), then the crash test for 50
# kill -9 cycles, then the stack with its bodies on Ceph RGW (tests/stack/test_stack_ceph.py).
chaos: build
	python3 tools/run_chaos.py --bin $(DEV)/sluice
	@scripts/install-deps.sh test
	SLUICE_SLOWHTTP_SCALE=long SLUICE_SLOWHTTP_RESULTS=bench/work/slowhttp-long.jsonl \
	  SLUICE_BIN=$(DEV)/sluice PYTHONPATH=tests/lib \
	  python3 -m unittest discover -v -s tests/integration -p 'test_slowhttp.py'
	SLUICE_CRASH_ITERATIONS=50 SLUICE_BIN=$(DEV)/sluice PYTHONPATH=tests/lib \
	  python3 -m unittest discover -v -s tests/integration -p 'test_crash.py'
	SLUICE_BIN=$(DEV)/sluice PYTHONPATH=tests/lib \
	  python3 -m unittest discover -v -s tests/stack -p 'test_stack_ceph.py'

# The chaos lab: the whole stack (4 processes) with a fault proxy on every wire, each overload
# scenario at the spec's scale, the report and plots written to bench/results/lab/. LAB_SCALE < 1
# offers proportionally less load to proportionally fewer slots (same knee, same shed share).
# "primary fails over" runs a Patroni cluster with etcd beside the stack (scripts/testenv/patroni.sh).
LAB_SCALE ?= 1.0
# Then the distributed flood against proof of work (bench/pow_flood.py; `make test` runs its short
# form, tests/integration/test_proof_of_work.py), 120 s a rung, plotted beside its report.
lab: build
	@scripts/install-deps.sh lab
	python3 tools/run_lab.py --bin $(DEV)/sluice --scale $(LAB_SCALE)
	SLUICE_BIN=$(DEV)/sluice python3 bench/pow_flood.py --seconds 120 \
	  --plot bench/results/proof-of-work-flood.png > bench/results/proof-of-work.md.new
	mv bench/results/proof-of-work.md.new bench/results/proof-of-work.md

# libFuzzer targets (clang), each for FUZZ_SECONDS, starting from the seed corpus in fuzz/corpus;
# the executions per target are printed at the end. `make test-fuzz` runs each for 5 s; `make test`
# replays the corpus and its mutations in its ASan build instead (fuzz/replay_main.cc).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := text ids multipart durations config request resp answers
fuzz:
	@scripts/install-deps.sh fuzz
	$(MAKE) fuzz-run FUZZ_SECONDS=$(FUZZ_SECONDS)

test-fuzz:
	@scripts/install-deps.sh fuzz
	$(MAKE) fuzz-run FUZZ_SECONDS=5

fuzz-run:
	CXX=clang++ cmake -S . -B build/fuzz -DSLUICE_BUILD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" >/dev/null
	cmake --build build/fuzz -j$(JOBS) --target fuzz_targets
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tools/lsan.supp \
	  build/fuzz/fuzz/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build/fuzz/ build/fuzz/corpus/$$t fuzz/corpus/$$t > build/fuzz/$$t.log 2>&1; \
	  rc=$$?; \
	  echo "fuzz $$t: $$(grep -o 'number_of_executed_units: [0-9]*' build/fuzz/$$t.log | cut -d' ' -f2) executions in $(FUZZ_SECONDS) s"; \
	  [ $$rc -eq 0 ] || { tail -60 build/fuzz/$$t.log; exit 1; }; \
	done

# The Debian package of a release build (-O2, hardened, stripped, with a -dbgsym package) into
# build/deb/, checked by lintian: `apt install ./build/deb/sluice_*.deb` (docs/operations.md,
# "Installing it as a service"). debian/ says what goes in it.
deb:
	@scripts/install-deps.sh deb
	JOBS=$(JOBS) scripts/build-deb.sh

# For systems without dpkg: a release build installed under PREFIX (DESTDIR for staging): the
# binary, sluice.1, the systemd unit, sysusers.d/tmpfiles.d entries and PREFIX/etc/sluice/sluice.toml
# (kept if it exists). deploy/systemd/install.cmake places the service's files.
PREFIX ?= /usr/local
install: deps
	cmake -S . -B build/install -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
	  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_WERROR=OFF -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build build/install -j$(JOBS)
	DESTDIR=$(DESTDIR) cmake --install build/install --prefix $(PREFIX) --strip

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build

# --- Images (issue 50) ---
# The OCI image (Containerfile) from this version's .deb (`make deb` first when build/deb/ has
# none), on a base built here from Debian's packages with mmdebstrap and kept between runs
# (scripts/build-image.sh): tagged localhost/sluice:VERSION and :latest. `make image-services`:
# the PostgreSQL, Redis and nginx image of deploy/compose/compose.yaml. podman on runc: crun
# refuses the hybrid cgroups of some hosts.
IMAGE_DEB = build/deb/sluice_$(shell dpkg-parsechangelog -S Version 2>/dev/null)_$(shell dpkg-architecture -qDEB_HOST_ARCH 2>/dev/null).deb
.PHONY: image image-services test-image
# The image and compose tests alone (tests/deploy/test_image.py, test_compose.py, ctest label
# `image`); make test runs them in its parallel stage.
test-image:
	@scripts/install-deps.sh test
	@$(MAKE) --no-print-directory build-dev-suite
	ctest --test-dir $(DEV) --output-on-failure -L image

image:
	@scripts/install-deps.sh image
	@[ -f $(IMAGE_DEB) ] || $(MAKE) --no-print-directory deb
	PODMAN_RUNTIME=$${PODMAN_RUNTIME-runc} scripts/build-image.sh $(IMAGE_DEB)

image-services:
	@scripts/install-deps.sh image
	PODMAN_RUNTIME=$${PODMAN_RUNTIME-runc} scripts/build-image.sh services
