# Multi-head attention, step by step, in C.
#
#   make              build libmha, the chapters and the tools
#> full
#                     and build/mha
#<
#   make walkthrough  run every chapter in order (installs missing packages);
#                     the chapters draw into plots/, which git does not track
#   make ch06         run one chapter
#   make test         every check (installs missing packages)
#> full
#   make parity       build/mha against PyTorch (installs python3-torch), and
#                     multi-head latent attention against a PyTorch reference
#   make browser-test the pages of mha view in headless Chromium (installs it)
#   make sanitize     the tests and chapters under AddressSanitizer + UBSan
#   make memcheck     every chapter and the suite under valgrind: no errors, no leaks
#   make fuzz         each fuzz harness for FUZZ_SECONDS (default 60)
#<
#   make transcripts  rewrite tests/expected/ from the chapters' output
#> full
#   make docs         weave the book in docs/ from the chapters and src/, with
#                     its pictures in docs/pictures/ (redrawn only when changed)
#   make book         the book for print in build/book/: one HTML file and
#                     its PDF, and each chapter's (installs chromium)
#   make key          the teacher's key in docs/teacher/: rewrite
#                     teacher/expected/ from teacher/*.c, then make docs
#   make snapshot CH=08   build/snapshot/08/: the code as of chapter 08
#   make snapshots    every chapter's snapshot, each built and tested
#   make handouts     every chapter's handout, each cut and built
#   make handout      a student's copy in handout/ with the exercises blank
#                     (CH=08: of chapters 01 .. 08 only; WITHOUT=a,b: those
#                     exercises given whole; FROM=06: those of chapters
#                     01 .. 05 too; HANDOUT_DIR=../x: elsewhere), a git
#                     repository of its own
#<
#> handout
#   make grade        which exercises pass (EXERCISE=name: that one only);
#                     the reports in build/grade/
#<
#> full
#   make gradescope   the Gradescope autograder (and Classroom 50's) in
#                     build/autograder/ (CH=, FROM=, WITHOUT= as for the
#                     handout)
#   make grade-class STUDENTS=DIR   every student's copy under DIR graded:
#                     build/grade-class/grades.csv
#<
#   make info         which CBLAS the build uses
#> full
#   make bench        the benchmark: tables and charts (plots/bench_*)
#   make clean-tree   the walkthrough and the book on other OpenBLAS kernels
#                     leave git status as it was
#   make fresh-root   the walkthrough and the tests on a new Debian root (as root)
#<
#   make help         this list
#   make clean
#
# BLAS=openblas (default) links GSL against OpenBLAS's CBLAS; BLAS=gsl
# against GSL's own reference CBLAS (libgslcblas), built into build/gslcblas.

ifeq ($(origin CC),default)
CC      := gcc
endif
BLAS    ?= openblas
OPT     ?= -O2
SAN     ?=
CFLAGS  ?= $(OPT) -g
WARN    := -std=c11 -Wall -Wextra -Werror
#> handout
# A student's copy (the file HANDOUT at its root) compiles without
# -Werror: a half-written exercise's warning (an unused variable) is
# shown, and the other exercises still build and grade; blanked
# exercises leave their static helpers unused until written.  The
# project's own builds and CI keep -Werror.
ifneq ($(wildcard HANDOUT),)
WARN    := $(filter-out -Werror,$(WARN)) -Wno-unused-function
endif
#<
# OpenMP runs the fast paths' loop over heads on every core (src/base/threads.h)
OMP     := -fopenmp

# pkg_config: pkg-config's answer, asked once, when a recipe first needs
# it (after `make deps` has installed pkg-config and the libraries), not
# once for every compile.
pkg_config = $(eval $(1) := $$(shell pkg-config $(2)))$($(1))

ifeq ($(BLAS),openblas)
BUILD   ?= build
GSL_LIBS = $(call pkg_config,GSL_LIBS,--define-variable=GSL_CBLAS_LIB=-lopenblas --libs gsl)
else ifeq ($(BLAS),gsl)
BUILD   ?= build/gslcblas
GSL_LIBS = $(call pkg_config,GSL_LIBS,--libs gsl)
else
$(error BLAS must be openblas or gsl, not '$(BLAS)')
endif

# BUILD, where everything built goes, is checked before anything is
# written (reading this Makefile writes $(BUILD)/tests/chapter-list, even
# for make -n): build or a folder under it, such as build/sanitize, so
# that it never lands at the root of the file system (BUILD= made
# /tests/chapter-list and /obj), among the sources (BUILD=.) or outside
# the project, and `make clean` removes it.  Letters, digits and . _ - /
# only: it is pasted into shell commands and make patterns unquoted.
BUILD_CHARS := a b c d e f g h i j k l m n o p q r s t u v w x y z \
               A B C D E F G H I J K L M N O P Q R S T U V W X Y Z \
               0 1 2 3 4 5 6 7 8 9 . _ - /
without_chars = $(if $(2),$(call without_chars,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
BUILD_RULE := must be build or a folder under build/ (letters, digits, . _ - and /; no space, no . or .. step)
# a $ in either would be expanded by make itself ($(shell ...) would run)
ifneq ($(findstring $$,$(value BUILD))$(findstring $$,$(value EXERCISE)),)
$(error BUILD and EXERCISE are plain names: no $$, which make would expand)
endif
ifneq ($(words $(BUILD)),1)
$(error BUILD '$(BUILD)' $(BUILD_RULE))
endif
ifneq ($(call without_chars,$(BUILD),$(BUILD_CHARS))$(filter-out build build/%,$(BUILD)),)
$(error BUILD '$(BUILD)' $(BUILD_RULE))
endif
ifneq ($(findstring /../,/$(BUILD)/)$(findstring /./,/$(BUILD)/),)
$(error BUILD '$(BUILD)' $(BUILD_RULE))
endif

# EXERCISE (make grade EXERCISE=NAME): one exercise's name, checked
# before anything runs (EXERCISE='a b' graded a alone, and EXERCISE='*'
# was expanded by the shell into the file names here).
ifneq ($(strip $(EXERCISE)),)
ifneq ($(words $(EXERCISE))$(call without_chars,$(EXERCISE),$(filter-out . - /,$(BUILD_CHARS))),1)
$(error EXERCISE '$(EXERCISE)' must be one exercise's name, letters, digits and _ (make grade lists them))
endif
endif

GSL_CFLAGS = $(call pkg_config,GSL_CFLAGS,--cflags gsl)
CPPFLAGS = -Isrc $(GSL_CFLAGS)
ALL_CFLAGS = $(WARN) $(OMP) $(CFLAGS) $(SAN)
LDLIBS   = $(GSL_LIBS) -lm
#> handout
# libzip reads .npz archives: mha's --state-dict (src/cli/torch.c)
ZIP_LIBS = $(call pkg_config,ZIP_LIBS,--libs libzip)
# The libraries the mha program links: LDLIBS's, or (below) the same
# two from their static archives.
CLI_LIBS = $(LDLIBS)
#<
#> full
# The full build's mha takes GSL and OpenBLAS from their static archives
# when the compiler finds both (Debian's libgsl-dev and libopenblas-dev
# install them): the shared OpenBLAS costs every run about 5 ms of symbol
# relocation before main, a tenth of a forward pass at B = 8, L = 128
# (tools/performance.md).  The same library code either way, so the same
# numbers to the bit (test_forward_stream); without an archive, or with
# BLAS=gsl, the shared libraries as above.  Asked when the link runs,
# after `make deps` has installed them.  OpenBLAS's calls that
# src/base/threads.c and program.c look up by name are exported, as a
# shared OpenBLAS has them; mha_program_init_lazy confines its threads.
static_archive = $(filter /%,$(shell $(CC) -print-file-name=$(1)))
ifeq ($(BLAS),openblas)
CLI_STATIC = -Wl,-Bstatic -lgsl -lopenblas -Wl,-Bdynamic -lpthread -lm \
    -Wl,--undefined=openblas_get_config \
    -Wl,--export-dynamic-symbol=openblas_* \
    -Wl,--export-dynamic-symbol=blas_thread_shutdown_
CLI_LIBS = $(if $(and $(call static_archive,libgsl.a),$(call static_archive,libopenblas.a)),$(CLI_STATIC),$(LDLIBS))
endif
#<
TEST_LIBS = $(call pkg_config,TEST_LIBS,--libs criterion)

LIB_SRC   := $(filter-out src/cli/%,$(wildcard src/*/*.c))
LIB_OBJ   := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
LIB       := $(BUILD)/libmha.a
CHAPTERS  := $(basename $(notdir $(wildcard chapters/[0-9][0-9]_*.c)))
CH_BIN    := $(addprefix $(BUILD)/chapters/,$(CHAPTERS))
TOOL_BIN  := $(BUILD)/cblas-info
#> full
TOOL_BIN  += $(BUILD)/weave $(BUILD)/bench $(BUILD)/mha-grad $(BUILD)/marks-filter \
             $(BUILD)/mla-run
#<
#> handout
CLI_SRC   := $(wildcard src/cli/*.c)
CLI_OBJ   := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRC))
# the mha program's parts without its main(), for the tools that reuse them
CLI_PARTS := $(filter-out $(BUILD)/obj/cli/mha.o,$(CLI_OBJ))
CLI_BIN   := $(BUILD)/mha
# The last chapter of this copy (21 in the full tree, NN in a snapshot or
# a handout of chapters 01 .. NN): what mha quiz asks by default.
LAST_CHAPTER := $(lastword $(sort $(foreach c,$(CHAPTERS),$(firstword $(subst _, ,$(c))))))
$(CLI_OBJ): CPPFLAGS += -DMHA_CHAPTER=$(patsubst 0%,%,$(LAST_CHAPTER))
#<
# The Debian Python, which apt-get's python3-torch is for, not whatever
# python3 comes first on PATH.
PYTHON    := /usr/bin/python3
TEST_SRC  := $(wildcard tests/*.c)
TEST_OBJ  := $(patsubst tests/%.c,$(BUILD)/tests/obj/%.o,$(TEST_SRC))
TEST_BIN  := $(BUILD)/tests/run_tests

# Header dependencies: every compile writes OUTPUT.d beside its output,
# naming the project's headers it read (-MMD), each also as a target of
# its own (-MP, so a header that is deleted does not stop the build).
# They are included at the end: touching a header rebuilds exactly what
# includes it, directly or through another header.
DEPFLAGS   = -MMD -MP -MF $@.d -MT $@

# plain `make` builds everything, whichever rule comes first below
.DEFAULT_GOAL := all

# Every chapter's name, AS_PARAM("01_...") ..., for the transcript tests.
CHAPTER_LIST := $(foreach c,$(CHAPTERS),AS_PARAM("$(c)"))
# The suites get that list as a -D flag, so they must be recompiled when a
# chapter is added or removed: a stamp file holds the list and is
# rewritten (while the Makefile is read) only when it changes.
CHAPTER_STAMP := $(BUILD)/tests/chapter-list
ifeq ($(filter clean,$(MAKECMDGOALS)),)
# (both sides stripped: GNU make 4.3 keeps the last newline of a file of
# more than 200 bytes that $(file <) reads, so the stamp differed every
# time, and every make compiled every suite again)
ifneq ($(strip $(file <$(CHAPTER_STAMP))),$(strip $(CHAPTER_LIST)))
$(shell mkdir -p $(dir $(CHAPTER_STAMP)))
$(file >$(CHAPTER_STAMP),$(CHAPTER_LIST))
endif
endif
$(CHAPTER_STAMP):
	@mkdir -p $(@D)
	$(file >$@,$(CHAPTER_LIST))

.PHONY: all build walkthrough test check transcripts info help clean deps
#> full
.PHONY: sanitize memcheck docs bench trace-cost handout handout-check test-grading \
        fuzz parity browser-test snapshot snapshots handouts module-pictures \
        clean-tree fresh-root grade-class gradescope
#<
#> handout
.PHONY: grade
#<

all: build
build: $(LIB) $(CH_BIN) $(TOOL_BIN) $(TEST_BIN)
#> handout
build: $(CLI_BIN)
#<

# libmha's objects and the mha program's (src/cli/ -> $(BUILD)/obj/cli/)
$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

#> 08
# The explorer's page (src/plot/explorer.c) carries its script and style:
# src/plot/explorer.js and src/plot/explorer.css without their chapter marks, as
# the C arrays explorer_js and explorer_css that xxd -i writes.
EXPLORER_GEN := $(BUILD)/gen
$(EXPLORER_GEN)/explorer_assets.h: src/plot/explorer.js src/plot/explorer.css
	@mkdir -p $(@D)
	grep -v -E '^[[:space:]]*//[<>]' src/plot/explorer.js > $(@D)/explorer.js
	grep -v -E '^[[:space:]]*//[<>]' src/plot/explorer.css > $(@D)/explorer.css
	cd $(@D) && xxd -i explorer.js > explorer_assets.h.tmp && \
	    xxd -i explorer.css >> explorer_assets.h.tmp && \
	    mv explorer_assets.h.tmp explorer_assets.h
$(BUILD)/obj/plot/explorer.o: $(EXPLORER_GEN)/explorer_assets.h
$(BUILD)/obj/plot/explorer.o: CPPFLAGS += -I$(EXPLORER_GEN)
#<

# A program of one source file (a chapter, a tool) linked with libmha.
$(BUILD)/chapters/%: chapters/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/cblas-info: tools/cblas_info.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) $< $(LIB) $(LDLIBS) -o $@

#> full
$(BUILD)/weave: tools/weave.c tools/marks.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $(filter %.c,$^) -o $@

$(BUILD)/marks-filter: tools/marks_filter.c tools/marks.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $(filter %.c,$^) -o $@

$(BUILD)/bench: tools/bench.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) $< $(LIB) $(LDLIBS) -o $@

# mha-grad: the module's gradients on .npy files, for tools/parity.py.
$(BUILD)/mha-grad: tools/mha_grad.c $(CLI_PARTS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) $< $(CLI_PARTS) $(LIB) $(LDLIBS) $(ZIP_LIBS) -o $@
#<

#> full
# mla-run: multi-head latent attention on .npy files, for tools/mla_parity.py.
$(BUILD)/mla-run: tools/mla_run.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) $< $(LIB) $(LDLIBS) -o $@
#<

#> handout
# The mha program: src/cli/ linked with libmha (and libzip for
# --state-dict's .npz in the full build).
$(CLI_BIN): $(CLI_OBJ) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CLI_OBJ) $(LIB) $(CLI_LIBS) $(ZIP_LIBS) -o $@
#<

# The suites, one object each, built with the paths and the chapter list
# the transcript, CLI and book tests need.
$(BUILD)/tests/obj/%.o: tests/%.c $(CHAPTER_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -D_GNU_SOURCE -Itests \
	    -DCHAPTER_DIR='"$(BUILD)/chapters"' -DWEAVE='"$(BUILD)/weave"' -DCHAPTER_PARAMS='$(CHAPTER_LIST)' \
	    -DMHA_BIN='"$(CLI_BIN)"' $(DEPFLAGS) -c $< -o $@

$(TEST_BIN): $(TEST_OBJ) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(TEST_OBJ) $(LIB) $(LDLIBS) $(ZIP_LIBS) $(TEST_LIBS) -o $@
#> full
# the CLI suite runs build/mha
$(TEST_BIN): | $(CLI_BIN)
#<

deps:
	@tools/deps.sh

# The two commands of the README: install what is missing, then go.
walkthrough: deps
	@$(MAKE) --no-print-directory -j2 build
	@for ch in $(CH_BIN); do \
	    echo "=================== $$(basename $$ch) ==================="; \
	    $$ch || exit 1; echo; \
	done

#> handout
ifeq ($(wildcard HANDOUT),)
#<
test: deps
	@$(MAKE) --no-print-directory -j2 check
#> full
	@$(MAKE) --no-print-directory -j2 --output-sync=target $(SLOW_CHECKS)
#<
#> handout
else
# A student's handout (tools/handout.sh): `make test` grades the exercises.
test: deps
	@$(MAKE) --no-print-directory grade
endif
#<

# The checks run many short programs of small parallel loops: between two
# loops OpenMP's idle threads sleep at once instead of spinning for a
# while (OMP_WAIT_POLICY, unless it is set), which on two cores shared
# by two tests at a time took a fifth of the suites' time.  No result
# depends on it.
test check: export OMP_WAIT_POLICY ?= passive

# check: the fast tier, the unit suites alone (and, in the full tree, the
# layers of src/), once the packages are there.  `make test` runs it and
# then the slow checks: the handout's round trip, the transcripts, the
# install check and the PyTorch parity check, which needs torch (large:
# it runs when the system Python has it, and `make parity` installs it).
check: build
	$(TEST_BIN) --jobs 2
#> full
	@$(PYTHON) tools/check-layers.py src

# The pages of mha view in Chromium, headless (tools/test-view.py): installs
# Debian's chromium, about 300 MB with what it needs, so a fresh machine's
# make test leaves it out; once it is installed make test runs these
# checks too (about 5 s).  CI runs this target.
browser-test:
	@tools/deps.sh chromium
	@$(MAKE) --no-print-directory $(CLI_BIN)
	@$(PYTHON) tools/test-view.py --browser $(CLI_BIN)

# build/mha forward against torch.nn.functional.multi_head_attention_forward.
parity:
	@tools/deps.sh python3-numpy python3-torch
	@$(MAKE) --no-print-directory $(CLI_BIN) $(BUILD)/mha-grad
	@$(PYTHON) tools/parity.py --mha $(CLI_BIN) --grad $(BUILD)/mha-grad
	@$(MAKE) --no-print-directory $(BUILD)/mla-run
	@$(PYTHON) tools/mla_parity.py --run $(BUILD)/mla-run
#<

# ch01, ch02, ...: one target per chapter, named by its number.
CH_TARGETS := $(foreach c,$(CHAPTERS),ch$(firstword $(subst _, ,$(c))))
.PHONY: $(CH_TARGETS)
$(CH_TARGETS): ch%: build
	@$(patsubst chapters/%.c,$(BUILD)/chapters/%,$(wildcard chapters/$*_*.c))

#> full
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer
sanitize: deps
	@$(MAKE) --no-print-directory -j2 BUILD=build/sanitize OPT=-O1 \
	    SAN="$(SAN_FLAGS)" build
	@tools/sanitize.sh build/sanitize

# Every chapter and the whole suite under valgrind: no errors, no leaks.
memcheck: build
	@tools/memcheck.sh $(BUILD)
#<

# All of them or none: a chapter that fails leaves every transcript as it
# was (tools/transcripts.sh).
transcripts: build
	@tools/transcripts.sh $(BUILD)/chapters tests/expected $(CHAPTERS)
	@echo "rewrote tests/expected/ for $(words $(CHAPTERS)) chapters; review with git diff"

#> full
# The code as of a chapter (tools/snapshot.sh): `make snapshot CH=08`
# writes build/snapshot/08/, which builds and passes its own tests, and
# replaces it only when it holds nothing a reader wrote (tools/
# test-snapshot.sh checks); `make snapshots` writes every chapter's and
# runs `make test` in each.
snapshot: $(BUILD)/marks-filter
	@tools/snapshot.sh "$(CH)" $(BUILD)/marks-filter

SNAPSHOT_CHAPTERS := $(foreach c,$(CHAPTERS),$(firstword $(subst _, ,$(c))))
snapshots: $(BUILD)/marks-filter
	@for ch in $(SNAPSHOT_CHAPTERS); do \
	    tools/snapshot.sh $$ch $(BUILD)/marks-filter >/dev/null && \
	    $(MAKE) --no-print-directory -C build/snapshot/$$ch test > build/snapshot/$$ch.log 2>&1 && \
	    echo "snapshot $$ch: $$(grep -o 'Tested: [0-9]*' build/snapshot/$$ch.log | head -1), passed" || \
	    { echo "snapshot $$ch: failed; the end of build/snapshot/$$ch.log:"; tail -n 30 build/snapshot/$$ch.log; exit 1; }; \
	done
#<

#> full
# Every chapter's handout cut and built (tools/test-handouts.sh), mha
# and its quiz included, and from chapter 08 on its mha run on .npy
# files against the teacher's: CI's stage, after make snapshots.
handouts: $(BUILD)/marks-filter $(BUILD)/weave $(CLI_BIN)
	@tools/test-handouts.sh $(BUILD)

# Exercises: `make handout` writes a student's copy cut from the chapters'
# code (chapters 01 .. CH, all of them by default) with the exercise
# bodies blanked, from the files git tracks, and never over a handout/
# that differs from a fresh one (tools/handout.sh); tools/test-handout.sh
# checks the round trip.
HANDOUT_DIR ?= handout
comma := ,
handout: $(BUILD)/marks-filter $(BUILD)/weave
	@tools/handout.sh --chapter "$(CH)" $(if $(FROM),--from "$(FROM)") --without "$(WITHOUT)" --tools $(BUILD) $(HANDOUT_DIR)

# The autograders, for a fresh handout: build/autograder/gradescope.zip
# (setup.sh and run_autograder at its root, the handout beside them) and
# build/autograder/autograder.py, Classroom 50's.
gradescope: $(BUILD)/marks-filter $(BUILD)/weave
	@rm -rf $(BUILD)/autograder/handout
	@tools/handout.sh $(if $(CH),--chapter $(CH)) $(if $(FROM),--from "$(FROM)") --without "$(WITHOUT)" --tools $(BUILD) $(BUILD)/autograder/handout > /dev/null
	@tools/grade.py gradescope $(BUILD)/autograder/handout $(BUILD)/autograder
	@rm -rf $(BUILD)/autograder/handout

# A whole class: `make grade-class STUDENTS=DIR` grades every folder
# under DIR (each a student's copy, such as a git clone of their
# repository) over a scratch copy of the handout (TEMPLATE=DIR, the
# handout they were given; by default a fresh one cut at CH=NN, or at
# the chapter the students' copies end with, FROM= and WITHOUT= as for
# the handout, or the exercises the copies' HANDOUT gives whole), taking
# from the student only the files that hold the exercises and writing
# nothing into DIR.
# The grades: $(BUILD)/grade-class/grades.csv, each student's reports
# and log beside it; the run before is kept in $(BUILD)/grade-class.previous.
grade-class: $(BUILD)/marks-filter $(BUILD)/weave
	@test -n "$(STUDENTS)" || { echo "grade-class: STUDENTS=DIR names the folder of the students' copies" >&2; exit 2; }
	@if [ -z "$(TEMPLATE)" ]; then \
	    ch="$(CH)"; without="$(WITHOUT)"; \
	    if [ -z "$$ch" ]; then \
	        found=$$(tools/grade.py class-chapter "$(STUDENTS)") || exit 2; \
	        ch=$${found%% *}; [ -n "$$without" ] || without=$$(echo "$$found" | cut -s -d' ' -f2); \
	    fi; \
	fi; \
	rm -rf $(BUILD)/grade-class.previous; \
	if [ -d $(BUILD)/grade-class ]; then mv $(BUILD)/grade-class $(BUILD)/grade-class.previous; fi; \
	mkdir -p $(BUILD)/grade-class; \
	if [ -n "$(TEMPLATE)" ]; then \
	    cp -a "$(TEMPLATE)" $(BUILD)/grade-class/handout; \
	else \
	    echo "grade-class: the students' handout, cut at chapter $$ch$(if $(FROM),$(comma) from chapter $(FROM))$${without:+, without $$without}"; \
	    tools/handout.sh --chapter "$$ch" $(if $(FROM),--from "$(FROM)") --without "$$without" --tools $(BUILD) $(BUILD)/grade-class/handout > /dev/null || exit 2; \
	fi
	@tools/grade.py class $(BUILD)/grade-class/handout "$(STUDENTS)" $(BUILD)/grade-class/grades.csv
#<

#> handout
# The grade (tools/grade.py): `make grade` says which exercises pass,
# `make grade EXERCISE=transpose_qkv` grades that one alone (exit 0 when
# it passes).  Each exercise's tests run in a process group of their own,
# GRADE_TIMEOUT seconds at most (default 10); the reports in
# $(BUILD)/grade/ (summary.txt, Gradescope's results.json, Classroom 50's
# result.json, grade.tap, grade.xml), or $(BUILD)/grade/NAME/ for
# EXERCISE=NAME.  STUDENT names the student on them (default git's
# user.name, then $USER).  The build runs quietly into a log: one line
# while it builds, then the grade (with the build's warnings, if any), or
# the compiler's error lines and where the whole log is, and reports that
# give every test 0.  When the build fails (or a blank was put back the
# last time), each exercise's file is compiled on its own: an exercise
# that does not compile is graded as its blank, its errors shown under
# it, and the others keep their points; then the build runs again.
GRADE_LOG := $(BUILD)/grade/build.log
grade:
	@mkdir -p $(BUILD)/grade
	@rm -f $(BUILD)/grade/compile-errors.json
	@echo "building the library and the tests ... (log: $(GRADE_LOG))"
	@if [ -n "$$(find $(BUILD)/grade/patched -type f 2>/dev/null)" ] || \
	    ! $(MAKE) --no-print-directory $(LIB) $(TEST_BIN) > $(GRADE_LOG) 2>&1; then \
	    tools/grade.py compile $(BUILD) $(BUILD)/grade -- $(CC) $(CPPFLAGS) $(ALL_CFLAGS) && \
	    $(MAKE) --no-print-directory $(LIB) $(TEST_BIN) > $(GRADE_LOG) 2>&1 || { \
	    tools/grade.py build-failed $(BUILD)/grade $(GRADE_LOG) '$(strip $(EXERCISE))'; \
	    exit 1; }; \
	fi
	@tools/grade.py run $(TEST_BIN) $(BUILD)/grade '$(strip $(EXERCISE))' --log $(GRADE_LOG)
#<

#> full
# The slow checks of `make test`, after the fast tier, two at a time
# (make -j2 -O: each one's output together, as it finishes).  Each works
# in a folder of its own under /tmp and reads the built programs only, so
# none disturbs another.  The handout's round trip runs make itself, as a
# student does: without the make above it (MAKEFLAGS), whose job slots a
# make it starts would complain it cannot reach.
SLOW_CHECKS := handout-check test-transcripts test-deps test-view test-parity \
               test-pictures test-book test-snapshot
.PHONY: $(SLOW_CHECKS)
handout-check: build
	@MAKEFLAGS= tools/test-handout.sh
test-transcripts:
	@tools/test-transcripts.sh $(BUILD)
test-snapshot: $(BUILD)/marks-filter
	@BUILD=$(BUILD) tools/test-snapshot.sh
test-deps:
	@tools/test-deps.sh
# the book's pictures (docs/pictures/) as make docs would keep them
test-pictures:
	@tools/docs-pictures.sh $(BUILD) --check
test-view:
	@$(PYTHON) tools/test-view.py $(CLI_BIN)
test-parity:
	@if $(PYTHON) -c 'import numpy, torch' 2>/dev/null; then \
	    $(PYTHON) tools/parity.py --quiet --mha $(CLI_BIN) --grad $(BUILD)/mha-grad && \
	    $(PYTHON) tools/mla_parity.py --quiet --run $(BUILD)/mla-run; \
	else \
	    echo "parity: skipped ($(PYTHON) cannot import numpy and torch; make parity installs them)"; \
	fi

# Grading where courses grade (tools/test-grading.sh): time-outs, crashes,
# leaks under valgrind, the reports, Gradescope's zip, a class graded.
# About a minute on its own handout, so it is CI's stage, not make test's.
test-grading: build
	@tools/test-grading.sh

# Fuzzing (libFuzzer, clang): each harness in tools/fuzz/ runs for
# FUZZ_SECONDS on its seed corpus; what it finds lands in build/fuzz/.
FUZZ_SECONDS ?= 60
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJ  := $(patsubst src/%.c,build/fuzz/obj/%.o,$(LIB_SRC))
FUZZERS   := $(patsubst tools/fuzz/%.c,build/fuzz/%,$(wildcard tools/fuzz/fuzz_*.c))

# the mha program's parts, without its main()
FUZZ_CLI  := $(patsubst src/%.c,build/fuzz/obj/%.o,$(filter-out src/cli/mha.c,$(CLI_SRC)))

.SECONDARY: $(FUZZ_OBJ) $(FUZZ_CLI)
# the program as of the last chapter, as $(CLI_OBJ) are
$(FUZZ_CLI): CPPFLAGS += -DMHA_CHAPTER=$(patsubst 0%,%,$(LAST_CHAPTER))
# the explorer's page carries its script and style (see above)
build/fuzz/obj/plot/explorer.o: $(EXPLORER_GEN)/explorer_assets.h
build/fuzz/obj/plot/explorer.o: CPPFLAGS += -I$(EXPLORER_GEN)
build/fuzz/obj/%.o: src/%.c
	@mkdir -p $(@D)
	clang $(CPPFLAGS) -std=c11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(DEPFLAGS) -c $< -o $@

build/fuzz/%: tools/fuzz/%.c $(FUZZ_OBJ) $(FUZZ_CLI)
	clang $(CPPFLAGS) -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer $(DEPFLAGS) $< $(FUZZ_CLI) \
	    $(FUZZ_OBJ) $(LDLIBS) $(ZIP_LIBS) -o $@

fuzz: deps
	@tools/deps.sh clang libclang-rt-14-dev
	@$(MAKE) --no-print-directory $(FUZZERS)
	@tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZERS)

# The module's dataflow for d2l's example, drawn by Graphviz from
# `mha trace --dot`: chapter 08 and the README show it.  plots/module.dot
# is the graph plots/module.svg and .png were drawn from: they are redrawn
# when the graph changes, not for the other bytes another Graphviz would
# write for the same graph.
MODULE_DOT := $(BUILD)/module.dot
# Each written under a temporary name and renamed only when complete.
$(MODULE_DOT): $(CLI_BIN)
	$(CLI_BIN) trace --batch 2 --queries 4 --kv 6 --hiddens 100 --heads 5 \
	    --valid-lens 3,2 --dot > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }
module-pictures: $(MODULE_DOT)
	@if ! cmp -s $(MODULE_DOT) plots/module.dot || [ ! -f plots/module.svg ] || \
	    [ ! -f plots/module.png ]; then \
	    for f in svg png; do \
	        dot -T$$f $(MODULE_DOT) > plots/module.$$f.tmp && \
	            mv plots/module.$$f.tmp plots/module.$$f || \
	            { rm -f plots/module.$$f.tmp; exit 1; }; \
	    done; \
	    cp $(MODULE_DOT) plots/module.dot && \
	    echo "docs: redrew plots/module.svg and plots/module.png"; \
	fi

# The book: docs/ woven from the chapters, their transcripts and src/,
# with the reference pages of tools/ (the mha program's from its --help
# texts, performance from plots/bench.md), all pages or none
# (tools/weave.c).  The chapters' pictures it shows are
# kept in docs/pictures/ and redrawn only when their data or script
# changed beyond rounding (tools/docs-pictures.sh says why).
docs: $(BUILD)/weave $(CH_BIN) $(CLI_BIN) module-pictures
	@tools/docs-pictures.sh $(BUILD)
	@mkdir -p docs
	@$(BUILD)/weave . docs $(CLI_BIN)
	@echo "docs: wove $(words $(CHAPTERS)) chapters into docs/"

# The book for print (tools/book.py): build/book/book.html, the whole
# book in one file that loads nothing from outside (its pictures inlined,
# a table of contents), build/book/book.pdf printed from it by headless
# Chromium, and each chapter alone in build/book/chapters/ as HTML and
# PDF.  Markdown to HTML with cmark-gfm, GitHub's own converter.
.PHONY: book test-book
book: docs
	@tools/deps.sh chromium
	@tools/book.py $(BUILD)/book
# make test: the HTML built and checked, and one chapter printed where
# Chromium is installed
test-book:
	@d=$$(mktemp -d /tmp/mha-book-XXXXXX) && { tools/book.py --check $$d; s=$$?; rm -rf $$d; exit $$s; }


# --- the teacher's key ------------------------------------------------
# teacher/NN_topic.c answers chapter NN's exercises: a program like a
# chapter, its prose the answers, its output the numbers they quote,
# checked against teacher/expected/NN_topic.txt by `make test` (the
# chapters suite) and woven by `make docs` into docs/teacher/, which
# `make test` holds to a fresh weave (the docs suite).  `make key`
# rewrites teacher/expected/ from the programs, all or none, and weaves
# the book again.  A student's handout has no teacher/, and builds no key
# even if one is left in it (its blanks would stop the programs).
KEYS    := $(if $(wildcard HANDOUT),,$(basename $(notdir $(wildcard teacher/[0-9][0-9]_*.c))))
KEY_BIN := $(addprefix $(BUILD)/teacher/,$(KEYS))
.PHONY: key
build: $(KEY_BIN)
$(BUILD)/teacher/%: teacher/%.c $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Ichapters $(ALL_CFLAGS) $(DEPFLAGS) $< $(LIB) $(LDLIBS) -o $@
key: $(KEY_BIN)
	@if [ -z "$(KEYS)" ]; then echo "key: no teacher/NN_*.c here (a student's copy has no key)" >&2; exit 2; fi
	@tools/transcripts.sh $(BUILD)/teacher teacher/expected $(KEYS)
	@echo "key: rewrote teacher/expected/ for $(words $(KEYS)) chapters; review with git diff"
	@$(MAKE) --no-print-directory docs
# --- end of the teacher's key ------------------------------------------

#<
info: $(BUILD)/cblas-info
	@$(BUILD)/cblas-info

# The comment at the top of this Makefile, its marks left out.
help:
	@sed -n '/^[^#]/q; /^#[<>]/d; s/^# \{0,1\}//p' Makefile

#> full

# The benchmark (tools/bench.c), about 5-10 minutes.  Three builds of one
# program: OpenBLAS (this one runs), GSL's reference CBLAS and tracing
# compiled out (both run by it as children).  BENCH_FLAGS=--quick for a
# short run.
# What tracing costs when off, in instructions counted by callgrind.
trace-cost: deps
	@tools/trace_cost.sh

bench: deps
	@$(MAKE) --no-print-directory build/bench $(CLI_BIN)
	@$(MAKE) --no-print-directory BLAS=gsl build/gslcblas/bench
	@$(MAKE) --no-print-directory BUILD=build/notrace \
	    CFLAGS="$(CFLAGS) -DMHA_NO_TRACE" build/notrace/bench
	build/bench $(BENCH_FLAGS) --gsl build/gslcblas/bench \
	    --notrace build/notrace/bench --torch tools/bench_torch.py --mha $(CLI_BIN)

# Running the chapters leaves git status as it was, on any CPU: the
# walkthrough and the book, with the kernels OpenBLAS is told to use, the
# ones it picks itself and others (tools/check-clean-tree.sh).
clean-tree: deps
	@tools/check-clean-tree.sh

# The README's two commands on a pristine Debian root (debootstrap, which
# it installs), as a user who has installed only make, git and sudo; as
# root, about 4 minutes (tools/fresh-root.sh).
fresh-root:
	@tools/fresh-root.sh

#<
clean:
	rm -rf build

# The header dependencies the compiles above wrote (DEPFLAGS).
-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/chapters/*.d \
                    $(BUILD)/tests/obj/*.d $(BUILD)/*.d $(BUILD)/teacher/*.d \
                    build/fuzz/obj/*/*.d build/fuzz/*.d)
