/*
 * compat.h
 *		Serving the schema of an earlier release (compat.c): which schema the
 *		database has, and what each released schema this library still
 *		serves has of its own (compat_0_1_0_*.c), in the form claim() and
 *		upsert_object() take it.
 */
#ifndef WI_COMPAT_H
#define WI_COMPAT_H

#include "postgres.h"

#include "executor/spi.h"
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

/* ---------------------------------------------------------------------
 * What a release's schema gives claim() and upsert_object()
 *
 * Their steps are the same on every schema this library serves (claim.c,
 * guard.c); the statements they run, and 0.1.0's version rule, differ.
 * This release's are claim.c's and guard.c's own; each earlier schema's
 * are its compat file's, which calls nothing of claim.c or guard.c.  What
 * every release runs with the same SQL stays with claim.c and guard.c.
 * --------------------------------------------------------------------- */

/*
 * One release's statements for claim(), prepared and kept for the
 * session.  The tenants are the last parameter of lease and mark, and the
 * last column of candidates: a schema without tenants (0.1.0) reads the
 * empty tenant there and declares no tenants parameter, and SPI binds the
 * parameters a statement declares.
 */
typedef struct WiClaimPlans
{
	/*
	 * ($1 rows, $2 after this inbox id, $3 fetch_delay): due events of
	 * objects without a live claim, by id: source id, source name, object
	 * type, object id, inbox id, tenant
	 */
	SPIPlanPtr	candidates;

	/*
	 * ($1 source ids, $2 object types, $3 object ids, $4 at most, $5 holder,
	 * $6 lease, $7 tenants): the leases taken, (token, expires_at, the
	 * candidate's 1-based position), by token
	 */
	SPIPlanPtr	lease;

	/*
	 * ($1 tokens, $2 source ids, $3 object types, $4 object ids, $5
	 * tenants): the events marked, (token, inbox id, strategy), by token and
	 * id
	 */
	SPIPlanPtr	mark;
} WiClaimPlans;

/* How far claim()'s scan for candidates reads. */
typedef struct WiClaimScan
{
	int			want;			/* distinct objects to find */
	int			page;			/* rows read by one execution */
	int			limit;			/* rows read at the most */
} WiClaimScan;

/*
 * What upsert_object()'s version rule weighs: the save against the object
 * as stored, whose row the save holds locked.
 */
typedef struct WiVersionFacts
{
	bool		fresh;			/* nothing was stored: the row was just made */
	bool		has_version;	/* else the save is the provider's present */
	Datum		version;		/* numeric; valid when has_version */
	bool		old_has_version;
	Datum		old_version;	/* numeric; valid when old_has_version */
	bool		deleted;		/* the save is a tombstone */
	bool		old_deleted;
	const char *old_evidence;	/* what the stored tombstone rests on (read,
								 * provider), or NULL */
	bool		same_content;	/* status, state and deleted as stored */
} WiVersionFacts;

/*
 * A release's version rule: "applied", "duplicate", "stale" or "tie", as a
 * constant string (it outlives SPI_finish()).  Called inside SPI.  A
 * fresh row must be "applied": upsert_object() raises for any other answer.
 */
typedef const char *(*WiVersionRule) (const WiVersionFacts *facts);

/*
 * One release's statements for upsert_object(), prepared and kept for the
 * session, and its rule.  The key is $1 source id, $2 object type, $3
 * object id in each.  A schema without tombstone evidence (0.1.0) reads
 * NULL as the evidence, declares no cause parameter (SPI binds the
 * parameters a statement declares) and records no revivals.
 */
typedef struct WiGuardPlans
{
	SPIPlanPtr	lock;			/* key: status, version, state, deleted, fresh,
								 * tombstone evidence, FOR UPDATE */
	SPIPlanPtr	fence;			/* key, $4 token: whether the save is fenced */
	SPIPlanPtr	update;			/* key, $4 status, $5 version, $6 state,
								 * $7 deleted, $8 token, $9 event id, $10
								 * cause (the tombstone's evidence) */
	SPIPlanPtr	remove;			/* key: deletes the row a fenced save made */
	SPIPlanPtr	revive;			/* key, $4 the tombstone's evidence, $5 its
								 * version, $6 event id: records the revival
								 * of a tombstone; NULL: none recorded */
	WiVersionRule rule;
} WiGuardPlans;

/* ---------------------------------------------------------------------
 * Release 0.1.0's schema, served until ALTER EXTENSION UPDATE
 * --------------------------------------------------------------------- */

/* compat_0_1_0_intake.c: 0.1.0's own intake() on 0.1.0's tables */
extern Datum wi_compat_0_1_0_intake(PG_FUNCTION_ARGS);

/*
 * compat_0_1_0_claim.c: 0.1.0's statements for claim() (inside SPI), and
 * in *scan how far 0.1.0's claim of max_objects read
 */
extern const WiClaimPlans *wi_compat_0_1_0_claim_plans(int max_objects, WiClaimScan *scan);

/* compat_0_1_0_guard.c: 0.1.0's statements and rule for upsert_object() (inside SPI) */
extern const WiGuardPlans *wi_compat_0_1_0_guard_plans(void);

#endif							/* WI_COMPAT_H */
