/*
 * compat.h
 *		Serving the schema of an earlier release (compat.c): which schema the
 *		database has, and the entry points of each released schema this
 *		library still serves (compat_0_1_0.c).
 */
#ifndef WI_COMPAT_H
#define WI_COMPAT_H

#include "postgres.h"

#include "fmgr.h"

/* The schema of the extension installed in this database. */
typedef enum WiSchema
{
	WI_SCHEMA_CURRENT,			/* the release of this library (EXTVERSION) */
	WI_SCHEMA_0_1_0,			/* release 0.1.0, not yet updated */
	WI_SCHEMA_OTHER				/* not installed, or a release this library does not know */
} WiSchema;

extern void wi_compat_init(void);

/*
 * The installed schema, cached per backend until pg_extension changes (a
 * syscache invalidation, taken in at the start of every transaction and
 * after every command that changes it).
 */
extern WiSchema wi_schema(void);

/* The installed extversion (palloc'd in the caller's context), or NULL. */
extern char *wi_schema_version(void);

/*
 * Raise, with the command to run, when the installed schema is an earlier
 * release's and function (its SQL name) has no path for it.
 */
extern void wi_schema_require_current(const char *function);

/* compat_0_1_0.c: 0.1.0's own semantics on 0.1.0's tables */
extern Datum wi_compat_0_1_0_intake(PG_FUNCTION_ARGS);
extern Datum wi_compat_0_1_0_claim(PG_FUNCTION_ARGS);
extern Datum wi_compat_0_1_0_upsert_object(PG_FUNCTION_ARGS);

#endif							/* WI_COMPAT_H */
