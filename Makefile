# webhook_inbox: the PostgreSQL extension (PGXS), and the receiver and tools
# in their own directories, driven from here.

EXTENSION = webhook_inbox
MODULE_big = webhook_inbox
EXT_VERSION = 0.1.0

EXT_SRCS = $(sort $(wildcard extension/*.c extension/adapters/*.c))
OBJS = $(EXT_SRCS:.c=.o)

# The install script is assembled from one fragment per part of the schema.
SQL_PARTS = sql/header.sql sql/core.sql $(sort $(wildcard sql/worker.sql)) \
	$(sort $(wildcard sql/effects.sql)) sql/presets.sql sql/grants.sql \
	sql/search_path.sql
DATA_built = sql/$(EXTENSION)--$(EXT_VERSION).sql
DATA = $(filter-out $(DATA_built), $(wildcard sql/$(EXTENSION)--*--*.sql))

PG_CPPFLAGS = -I$(srcdir)/extension
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare
SHLIB_LINK = -lcurl

# The three suites: pg_regress, isolation and TAP, each on a private server.
REGRESS = $(sort $(notdir $(basename $(wildcard regress/sql/*.sql))))
REGRESS_OPTS = --inputdir=regress --outputdir=regress/out \
	--temp-instance=regress/out/tmp_regress --temp-config=regress/regress.conf
ISOLATION = $(sort $(notdir $(basename $(wildcard regress/specs/*.spec))))
ISOLATION_OPTS = --inputdir=regress --outputdir=regress/out_isolation \
	--temp-instance=regress/out_isolation/tmp --temp-config=regress/regress.conf
TAP_TESTS = 1
PROVE_TESTS = $(sort $(wildcard regress/t/*.pl))
PROVE_FLAGS = --timer
EXTRA_CLEAN = regress/out regress/out_isolation tmp_check

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track headers: every object depends on all of ours.
$(OBJS): $(wildcard extension/*.h)

SUBDIRS = $(patsubst %/Makefile,%,$(wildcard receiver/Makefile tools/Makefile))

sql/$(EXTENSION)--$(EXT_VERSION).sql: $(SQL_PARTS)
	cat $^ > $@

all: sql/$(EXTENSION)--$(EXT_VERSION).sql subdirs
install: install-subdirs
clean: clean-subdirs

.PHONY: subdirs install-subdirs clean-subdirs test run bench fuzz \
	installcheck-regress installcheck-isolation installcheck-tap
subdirs:
	@for d in $(SUBDIRS); do $(MAKE) -C $$d all || exit 1; done
install-subdirs:
	@for d in $(SUBDIRS); do $(MAKE) -C $$d install || exit 1; done
clean-subdirs:
	@for d in $(SUBDIRS); do $(MAKE) -C $$d clean || exit 1; done

# Each suite on its own, so that one failing does not hide the others.
installcheck-regress:
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
installcheck-isolation:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
installcheck-tap:
	$(prove_installcheck)

# The README's two commands.
test:
	@scripts/test.sh
run:
	@scripts/run.sh
bench:
	@scripts/bench.sh
fuzz:
	@if [ -d receiver/fuzz ]; then $(MAKE) -C receiver fuzz-run; fi
