# Multi-head attention, step by step, in C.
#
#   make              build libmha, the chapters and the tools into build/
#   make walkthrough  run every chapter in order (installs missing packages)
#   make ch06         run one chapter
#   make test         every check (installs missing packages)
#   make sanitize     the tests and chapters under AddressSanitizer + UBSan
#   make memcheck     every chapter under valgrind: no errors, no leaks
#   make transcripts  rewrite tests/expected/ from the chapters' output
#   make info         which CBLAS the build uses
#   make bench        the benchmark: tables and charts (plots/bench_*)
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
# OpenMP runs the fast paths' loop over heads on every core (src/threads.h)
OMP     := -fopenmp

ifeq ($(BLAS),openblas)
BUILD   ?= build
GSL_LIBS = $(shell pkg-config --define-variable=GSL_CBLAS_LIB=-lopenblas --libs gsl)
else ifeq ($(BLAS),gsl)
BUILD   ?= build/gslcblas
GSL_LIBS = $(shell pkg-config --libs gsl)
else
$(error BLAS must be openblas or gsl, not '$(BLAS)')
endif

CPPFLAGS = -Isrc $(shell pkg-config --cflags gsl)
ALL_CFLAGS = $(WARN) $(OMP) $(CFLAGS) $(SAN)
LDLIBS   = $(GSL_LIBS) -lm
TEST_LIBS = $(shell pkg-config --libs criterion)

LIB_SRC   := $(wildcard src/*.c)
LIB_OBJ   := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
LIB       := $(BUILD)/libmha.a
CHAPTERS  := $(basename $(notdir $(wildcard chapters/[0-9][0-9]_*.c)))
CH_BIN    := $(addprefix $(BUILD)/chapters/,$(CHAPTERS))
TOOL_BIN  := $(BUILD)/cblas-info $(BUILD)/bench
TEST_SRC  := $(wildcard tests/*.c)
TEST_BIN  := $(BUILD)/tests/run_tests
HEADERS   := $(wildcard src/*.h)

# Every chapter's name, AS_PARAM("01_...") ..., for the transcript tests.
CHAPTER_LIST := $(foreach c,$(CHAPTERS),AS_PARAM("$(c)"))

.PHONY: all build walkthrough test check sanitize memcheck transcripts \
        info bench clean deps

all: build
build: $(LIB) $(CH_BIN) $(TOOL_BIN) $(TEST_BIN)

$(BUILD)/obj/%.o: src/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/chapters/%: chapters/%.c chapters/lesson.h $(LIB) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/cblas-info: tools/cblas_info.c $(LIB) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/bench: tools/bench.c $(LIB) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(TEST_BIN): $(TEST_SRC) tests/check.h $(LIB) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -D_GNU_SOURCE -Itests \
	    -DCHAPTER_DIR='"$(BUILD)/chapters"' -DCHAPTER_PARAMS='$(CHAPTER_LIST)' \
	    $(TEST_SRC) $(LIB) $(LDLIBS) $(TEST_LIBS) -o $@

deps:
	@tools/deps.sh

# The two commands of the README: install what is missing, then go.
walkthrough: deps
	@$(MAKE) --no-print-directory build
	@for ch in $(CH_BIN); do \
	    echo "=================== $$(basename $$ch) ==================="; \
	    $$ch || exit 1; echo; \
	done

test: deps
	@$(MAKE) --no-print-directory check

# check: what `make test` runs once the packages are there.
check: build
	$(TEST_BIN) --jobs 2
	@$(MAKE) --no-print-directory memcheck

# ch01, ch02, ...: one target per chapter, named by its number.
CH_TARGETS := $(foreach c,$(CHAPTERS),ch$(firstword $(subst _, ,$(c))))
.PHONY: $(CH_TARGETS)
$(CH_TARGETS): ch%: build
	@$(patsubst chapters/%.c,$(BUILD)/chapters/%,$(wildcard chapters/$*_*.c))

SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer
sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build/sanitize OPT=-O1 \
	    SAN="$(SAN_FLAGS)" build
	@tools/sanitize.sh build/sanitize

# Every chapter and the whole suite under valgrind: no errors, no leaks.
memcheck: build
	@tools/memcheck.sh $(BUILD)

transcripts: build
	@for ch in $(CHAPTERS); do \
	    $(BUILD)/chapters/$$ch > tests/expected/$$ch.txt || exit 1; \
	done
	@echo "rewrote tests/expected/ for $(words $(CHAPTERS)) chapters; review with git diff"

info: $(BUILD)/cblas-info
	@$(BUILD)/cblas-info

# The benchmark (tools/bench.c), about 5-10 minutes.  Three builds of one
# program: OpenBLAS (this one runs), GSL's reference CBLAS and tracing
# compiled out (both run by it as children).  BENCH_FLAGS=--quick for a
# short run.
bench: deps
	@$(MAKE) --no-print-directory build/bench
	@$(MAKE) --no-print-directory BLAS=gsl build/gslcblas/bench
	@$(MAKE) --no-print-directory BUILD=build/notrace \
	    CFLAGS="$(CFLAGS) -DMHA_NO_TRACE" build/notrace/bench
	build/bench $(BENCH_FLAGS) --gsl build/gslcblas/bench \
	    --notrace build/notrace/bench --torch tools/bench_torch.py

clean:
	rm -rf build
