# webhook_inbox: the PostgreSQL extension (PGXS), and the receiver and tools
# in their own directories, driven from here.

EXTENSION = webhook_inbox
MODULE_big = webhook_inbox

# The release being built: the one place the version is written.  It goes
# into the control file, META.json, the C code (EXTVERSION), the binaries'
# --version, and is checked against debian/changelog.
EXT_VERSION = 0.2.0

# The list of source kinds every program and the SQL take from.
KINDS_H = include/webhook_inbox_kinds.h

EXT_SRCS = $(sort $(wildcard extension/*.c extension/adapters/*.c))
OBJS = $(EXT_SRCS:.c=.o)

# The install script is assembled from one fragment per part of the schema.
SQL_PARTS = sql/header.sql sql/core.sql $(sort $(wildcard sql/worker.sql)) \
	$(sort $(wildcard sql/effects.sql)) sql/credentials.sql sql/presets.sql sql/ops.sql sql/grants.sql \
	sql/seal_secrets.sql sql/search_path.sql
# Fragments re-run whole at the end of every upgrade script too: each of
# their statements must be idempotent (sql/search_path.sql pins search_path
# on every function, including those the upgrade re-created;
# sql/seal_secrets.sql encrypts secrets kept in clear when a key file is set).
SQL_RERUN = sql/seal_secrets.sql sql/search_path.sql
# Each sql/upgrade/FROM--$(EXT_VERSION).sql (hand-written DDL) becomes the
# upgrade script sql/$(EXTENSION)--FROM--$(EXT_VERSION).sql: that DDL, then
# every function, view, comment and grant of the fragments re-created.
UPGRADE_FROM = $(patsubst sql/upgrade/%--$(EXT_VERSION).sql,%,$(wildcard sql/upgrade/*--$(EXT_VERSION).sql))
UPGRADE_SCRIPTS = $(foreach v,$(UPGRADE_FROM),sql/$(EXTENSION)--$(v)--$(EXT_VERSION).sql)
DATA_built = sql/$(EXTENSION)--$(EXT_VERSION).sql $(UPGRADE_SCRIPTS)
# Released install and upgrade scripts are tracked and never edited again.
DATA = $(filter-out $(DATA_built), $(wildcard sql/$(EXTENSION)--*.sql))

PG_CPPFLAGS = -I$(srcdir)/extension -I$(srcdir)/include -DEXTVERSION='"$(EXT_VERSION)"'
# -Wshadow=compatible-local is PGXS's own from 16: on every major, so that
# 15 refuses what 16 would.
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare \
	-Wshadow=compatible-local
SHLIB_LINK = -lcurl -lcrypto

# The three suites: pg_regress, isolation and TAP, each on a private server.
# pg_regress creates the extension in its database (--load-extension), so the
# same files also run on a database whose extension was upgraded
# (regress/t/501_release_upgrade.pl).
REGRESS = $(sort $(notdir $(basename $(wildcard regress/sql/*.sql))))
REGRESS_OPTS = --inputdir=regress --outputdir=regress/out --load-extension=$(EXTENSION) \
	--temp-instance=regress/out/tmp_regress --temp-config=regress/regress.conf
ISOLATION = $(sort $(notdir $(basename $(wildcard regress/specs/*.spec))))
ISOLATION_OPTS = --inputdir=regress --outputdir=regress/out_isolation \
	--temp-instance=regress/out_isolation/tmp --temp-config=regress/regress.conf
TAP_TESTS = 1
PROVE_TESTS ?= $(sort $(wildcard regress/t/*.pl))
EXTRA_CLEAN = regress/out regress/out_isolation tmp_check $(EXTENSION).control META.json $(MAN_PAGES) .pg-build \
	$(EXTENSION)-*.zip extension/fuzz/fuzz-intake extension/fuzz/corpus

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# On a machine without PostgreSQL's development files, make test and make run
# install them first (scripts/deps.sh) and build afterwards; anything else
# needs them now.
ifeq ($(PGXS),)
ifneq ($(filter-out test run bench bench-majors,$(or $(MAKECMDGOALS),all)),)
$(error $(PG_CONFIG) not found: scripts/deps.sh installs PostgreSQL 15 and its development files, or set PG_CONFIG=.../pg_config)
endif
else
include $(PGXS)
endif

# The TAP files run WI_TAP_JOBS at a time (after PGXS, which empties
# PROVE_FLAGS), as regress/testrules.yml allows: the files that bound a time
# or a rate run first, alone; every test picks its ports through
# PG_TEST_PORT_DIR's locks and its directories under tmp_check.
WI_TAP_JOBS ?= 2
PROVE_FLAGS = --timer -j$(WI_TAP_JOBS)
installcheck-tap: export HARNESS_RULESFILE = $(abspath regress/testrules.yml)

# PGXS does not track headers: every object depends on all of ours (and on
# this file, which sets EXTVERSION).
$(OBJS): $(wildcard extension/*.h) $(KINDS_H) include/webhook_inbox_hex.h Makefile

# Nor the PostgreSQL it builds for: .pg-build names the one of the objects
# (pg_config's version and server headers), rewritten as make reads this
# file when PG_CONFIG names another (PGXS's .SECONDARY keeps a stamp rule
# from ever running), so that make PG_CONFIG=<another major> rebuilds the
# library instead of installing the previous one's objects into it.
PG_BUILD_ID := $(strip $(shell $(PG_CONFIG) --version 2>/dev/null) $(shell $(PG_CONFIG) --includedir-server 2>/dev/null))
ifneq ($(PG_BUILD_ID),)
ifneq ($(PG_BUILD_ID),$(shell cat .pg-build 2>/dev/null))
$(shell echo '$(PG_BUILD_ID)' > .pg-build)
endif
$(OBJS) $(OBJS:.o=.bc): .pg-build
endif

SUBDIRS = $(patsubst %/Makefile,%,$(wildcard receiver/Makefile tools/Makefile))

# The receiver and the simulator go on PATH, not into PostgreSQL's bindir:
# $(PREFIX)/bin and their man pages under $(PREFIX)/share/man/man1.
PREFIX ?= /usr/local

# The source kinds are written once, in $(KINDS_H); the @SOURCE_KINDS@
# placeholders (the sources.kind CHECK, create_source()'s hint, the receiver's
# man page) are filled from it, in the install script and the upgrade's DDL
# alike.
SOURCE_KINDS = perl scripts/source-kinds.pl $(KINDS_H)

sql/$(EXTENSION)--$(EXT_VERSION).sql: $(SQL_PARTS) $(KINDS_H) scripts/source-kinds.pl
	$(SOURCE_KINDS) $(SQL_PARTS) > $@.tmp
	mv $@.tmp $@

sql/$(EXTENSION)--%--$(EXT_VERSION).sql: sql/upgrade/%--$(EXT_VERSION).sql $(SQL_PARTS) scripts/upgrade-script.pl \
		$(KINDS_H) scripts/source-kinds.pl Makefile
	perl scripts/upgrade-script.pl --extension $(EXTENSION) --to $(EXT_VERSION) \
		$(addprefix --rerun ,$(SQL_RERUN)) $< $(filter-out $(SQL_RERUN),$(SQL_PARTS)) > $@.tmp
	$(SOURCE_KINDS) $@.tmp > $@.tmp2
	rm $@.tmp
	mv $@.tmp2 $@

# Files that carry the version, generated from their templates.
$(EXTENSION).control: $(EXTENSION).control.in Makefile
	sed 's/@EXT_VERSION@/$(EXT_VERSION)/g' $< > $@
META.json: META.json.in Makefile
	sed 's/@EXT_VERSION@/$(EXT_VERSION)/g' $< > $@
MAN_PAGES = man/webhook-receiver.1 man/webhook-sim.1
man/%.1: man/%.1.in Makefile $(KINDS_H) scripts/source-kinds.pl
	$(SOURCE_KINDS) $< > $@.tmp
	sed 's/@EXT_VERSION@/$(EXT_VERSION)/g' $@.tmp > $@
	rm $@.tmp

all: $(EXTENSION).control META.json $(DATA_built) $(MAN_PAGES) subdirs
install: install-subdirs install-man
clean: clean-subdirs

.PHONY: subdirs install-subdirs install-man clean-subdirs test test-matrix run bench bench-majors fuzz fuzz-intake print-sql-parts dist deb \
	installcheck-regress installcheck-isolation installcheck-tap extension-dir
subdirs:
	@for d in $(SUBDIRS); do $(MAKE) -C $$d all VERSION=$(EXT_VERSION) || exit 1; done
install-subdirs:
	@for d in $(SUBDIRS); do $(MAKE) -C $$d install VERSION=$(EXT_VERSION) PREFIX='$(PREFIX)' || exit 1; done
install-man: $(MAN_PAGES)
	install -d '$(DESTDIR)$(PREFIX)/share/man/man1'
	install -m 644 $(MAN_PAGES) '$(DESTDIR)$(PREFIX)/share/man/man1/'
clean-subdirs:
	@for d in $(SUBDIRS); do $(MAKE) -C $$d clean || exit 1; done

# Each suite on its own, so that one failing does not hide the others.
installcheck-regress:
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
installcheck-isolation:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
installcheck-tap:
	$(prove_installcheck)

# The PGXN distribution: the committed tree (HEAD) plus what make generates
# from it (META.json, the control file, the release's scripts, man pages).
DIST = $(EXTENSION)-$(EXT_VERSION)
dist: all
	git archive --format=zip --prefix=$(DIST)/ $(addprefix --add-file=,META.json $(EXTENSION).control) \
		--prefix=$(DIST)/sql/ $(addprefix --add-file=,$(DATA_built)) \
		--prefix=$(DIST)/man/ $(addprefix --add-file=,$(MAN_PAGES)) \
		--prefix=$(DIST)/ -o $(DIST).zip HEAD
	@echo $(DIST).zip

# The extension alone under a directory of its own, laid out as
# CloudNativePG mounts an extension image: the library in lib/, the control
# file and every install and upgrade script in share/extension/, nothing
# else.  PostgreSQL 18 and later load it from there with
#   extension_control_path = '$system:DIR/share'   (the server adds /extension)
#   dynamic_library_path = '$libdir:DIR/lib'
# and shared_preload_libraries = 'webhook_inbox' (the bare name: a name with
# a directory is not looked up in dynamic_library_path); docs/operations.md.
# Our files of an earlier run are replaced, nothing else there is touched.
EXTENSION_DIR ?= build/extension
extension-dir: $(MODULE_big)$(DLSUFFIX) $(EXTENSION).control $(DATA) $(DATA_built)
	@test -n '$(EXTENSION_DIR)' || { echo 'extension-dir: EXTENSION_DIR is empty' >&2; exit 1; }
	rm -f '$(EXTENSION_DIR)/lib/$(MODULE_big)$(DLSUFFIX)' '$(EXTENSION_DIR)/share/extension/$(EXTENSION).control' \
		'$(EXTENSION_DIR)/share/extension/$(EXTENSION)--'*.sql
	$(MKDIR_P) '$(EXTENSION_DIR)/lib' '$(EXTENSION_DIR)/share/extension'
	$(INSTALL_SHLIB) $(MODULE_big)$(DLSUFFIX) '$(EXTENSION_DIR)/lib/'
	$(INSTALL_DATA) $(EXTENSION).control $(DATA) $(DATA_built) '$(EXTENSION_DIR)/share/extension/'
	@dir="$$(cd '$(EXTENSION_DIR)' && pwd)"; \
	echo "$$dir: $(EXTENSION) $(EXT_VERSION) for PostgreSQL $(MAJORVERSION); in postgresql.conf (PostgreSQL 18 and later):"; \
	printf "  extension_control_path = '%s:%s/share'\n  dynamic_library_path = '%s:%s/lib'\n" '$$system' "$$dir" '$$libdir' "$$dir"

# For the tests: the fragments, in order.
print-sql-parts:
	@echo $(SQL_PARTS)

# Debian packages, built out of a copy of the tree into build/deb.
deb:
	@scripts/deb.sh

# The README's two commands.
test:
	@scripts/test.sh
# The suites on the other PostgreSQL majors only (WI_PG_MAJORS, default 17 18)
test-matrix:
	@scripts/test-majors.sh
run:
	@scripts/run.sh
bench:
	@scripts/bench.sh
# The receiver and worker parts on each PostgreSQL major, one table (BENCH_MAJORS)
bench-majors:
	@scripts/bench.sh --majors
fuzz: fuzz-intake
	@if [ -d receiver/fuzz ]; then $(MAKE) -C receiver fuzz-run; fi

# intake()'s reading of ids and types, without a server (extension/fuzz/)
FUZZ_TIME ?= 60
extension/fuzz/fuzz-intake: extension/fuzz/fuzz_intake.c extension/intake_ids.c extension/intake_ids.h $(KINDS_H)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -Wall -Wextra -Werror -Wno-unused-parameter \
		-Wno-missing-field-initializers -Wno-sign-compare -Wno-ignored-attributes -DFRONTEND \
		-I$(shell $(PG_CONFIG) --includedir-server) -Iextension -Iinclude -o $@ \
		extension/fuzz/fuzz_intake.c extension/intake_ids.c \
		-L$(shell $(PG_CONFIG) --pkglibdir) -L$(shell $(PG_CONFIG) --libdir) -lpgcommon -lpgport
fuzz-intake: extension/fuzz/fuzz-intake
	mkdir -p extension/fuzz/corpus
	ASAN_OPTIONS=detect_leaks=0 ./extension/fuzz/fuzz-intake -max_total_time=$(FUZZ_TIME) -max_len=4096 \
		-print_final_stats=1 extension/fuzz/corpus extension/fuzz/seeds
