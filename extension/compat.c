/*
 * compat.c
 *		Which release's schema the database has, so that this library keeps
 *		serving a database whose extension has not been updated yet.
 *
 * The C functions of every release are bound by symbol name through
 * MODULE_PATHNAME, one library for all: once a new release's library is
 * installed and PostgreSQL restarted, a database still at the earlier
 * release calls this library's symbols with that release's tables, until
 * someone runs ALTER EXTENSION webhook_inbox UPDATE.  Intake must not stop
 * meanwhile (every delivery would be answered 503), so each entry point
 * that an earlier release's SQL binds asks wi_schema() first and, for an
 * earlier schema, runs that release's behaviour on its own tables: its own
 * code, or this release's steps with its statements where the steps are the
 * same (compat_0_1_0_intake.c, compat_0_1_0_claim.c and
 * compat_0_1_0_guard.c for 0.1.0; see compat.h).  Entry points without such
 * a path (the ones the background worker's work needs: sweep_now,
 * run_effects) refuse with the command to run; the worker itself waits
 * (worker.c).
 *
 * The answer is cached per backend: a lookup of pg_extension per call
 * would cost every delivery an index scan.  The syscache on pg_extension's
 * OID (EXTENSIONOID) is invalidated whenever the row changes, in every
 * backend once the writer commits: ALTER EXTENSION UPDATE, DROP and CREATE
 * EXTENSION all reach the callback, which empties the cache.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "compat.h"

static bool schema_valid = false;
static WiSchema schema_cached = WI_SCHEMA_OTHER;
static char schema_version[NAMEDATALEN];	/* the installed extversion, "" if none */

static void
schema_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	schema_valid = false;
}

/* At library load: no change of pg_extension goes unseen after it. */
void
wi_compat_init(void)
{
	CacheRegisterSyscacheCallback(EXTENSIONOID, schema_inval_callback, (Datum) 0);
}

/*
 * Read the installed version.  Outside a transaction (there is no catalog
 * access then) the extension counts as not installed, and nothing is cached.
 */
static void
schema_load(void)
{
	Oid			extoid;
	HeapTuple	tup;

	schema_version[0] = '\0';
	schema_cached = WI_SCHEMA_OTHER;
	if (!IsTransactionState())
		return;

	/*
	 * Marked valid first: an invalidation that arrives while the catalogs are
	 * read (they take locks, which takes invalidations in) clears it again.
	 */
	schema_valid = true;
	extoid = get_extension_oid("webhook_inbox", true);
	if (!OidIsValid(extoid))
		return;
	tup = SearchSysCache1(EXTENSIONOID, ObjectIdGetDatum(extoid));
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = SysCacheGetAttr(EXTENSIONOID, tup, Anum_pg_extension_extversion, &isnull);

		if (!isnull)
		{
			char	   *v = TextDatumGetCString(d);

			strlcpy(schema_version, v, sizeof(schema_version));
			pfree(v);
		}
		ReleaseSysCache(tup);
	}
	if (strcmp(schema_version, EXTVERSION) == 0)
		schema_cached = WI_SCHEMA_CURRENT;
	else if (strcmp(schema_version, "0.1.0") == 0)
		schema_cached = WI_SCHEMA_0_1_0;
}

WiSchema
wi_schema(void)
{
	if (!schema_valid)
		schema_load();
	return schema_cached;
}

char *
wi_schema_version(void)
{
	if (!schema_valid)
		schema_load();
	return schema_version[0] != '\0' ? pstrdup(schema_version) : NULL;
}

void
wi_schema_require_current(const char *function)
{
	char	   *installed;

	if (wi_schema() != WI_SCHEMA_0_1_0)
		return;
	installed = wi_schema_version();
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("webhook_inbox.%s() needs the extension updated to %s", function, EXTVERSION),
			 errdetail("The database has webhook_inbox %s installed; the library loaded is %s.",
					   installed ? installed : "(none)", EXTVERSION),
			 errhint("Run ALTER EXTENSION webhook_inbox UPDATE in this database.")));
}
