/*
 * outcome.h
 *		What happened to an event or a claim, as one enum with a name table
 *		(outcome.c).  SQL reports outcomes by these names; the C code turns
 *		each into the enum once and never compares strings.
 */
#ifndef WI_OUTCOME_H
#define WI_OUTCOME_H

#include "postgres.h"

#include "stats.h"

typedef enum WiOutcome
{
	WI_OUT_APPLIED,				/* the mirror changed */
	WI_OUT_DUPLICATE,			/* nothing new: already applied or recorded */
	WI_OUT_STALE,				/* older than the stored version */
	WI_OUT_TIE,					/* equal version, different content */
	WI_OUT_BACKWARD,			/* an illegal transition, recorded */
	WI_OUT_RECORDED,			/* an occurrence recorded for the first time */
	WI_OUT_IGNORED,				/* the route says ignore */
	WI_OUT_QUARANTINED,			/* set aside with a reason */
	WI_OUT_UNORDERABLE,			/* quarantined: the route cannot be ordered */
	WI_OUT_FENCED,				/* the claim is no longer current */
	WI_OUT_TOMBSTONE,			/* the provider no longer has the object */
	WI_OUT_RETRY,				/* put back for a later attempt */
	WI_OUT_DEFERRED,			/* put back without counting an attempt */
	WI_OUT_NEED_FETCH,			/* only the provider's present can decide */
	WI_OUT_TAKEN,				/* events a round took without a lease */
	WI_OUT_REVIVED,				/* a tombstone a read inferred yielded to a newer version */
	WI_OUT_HIDDEN,				/* the read API cannot see it: hidden, not deleted */
	WI_OUT__COUNT
} WiOutcome;

/* Raises (a bug, not a user error) for a name not in the table. */
extern WiOutcome wi_outcome_from_name(const char *name);
extern const char *wi_outcome_name(WiOutcome outcome);

/* Adds n to the counter the outcome is counted in, if any. */
extern void wi_outcome_count(WiOutcome outcome, uint64 n);

#endif							/* WI_OUTCOME_H */
