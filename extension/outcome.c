/*
 * outcome.c
 *		The names of the outcomes SQL reports, and the counter each one is
 *		counted in.
 */
#include "postgres.h"

#include "outcome.h"

typedef struct OutcomeInfo
{
	const char *name;
	int			stat;			/* a WiStat, or -1: not counted */
} OutcomeInfo;

/* in WiOutcome order */
static const OutcomeInfo outcomes[WI_OUT__COUNT] = {
	[WI_OUT_APPLIED] = {"applied", WI_STAT_SAVED},
	[WI_OUT_DUPLICATE] = {"duplicate", WI_STAT_DUPLICATES},
	[WI_OUT_STALE] = {"stale", WI_STAT_STALE},
	[WI_OUT_TIE] = {"tie", WI_STAT_TIES},
	[WI_OUT_BACKWARD] = {"backward", WI_STAT_BACKWARD},
	[WI_OUT_RECORDED] = {"recorded", WI_STAT_OCCURRENCES},
	[WI_OUT_IGNORED] = {"ignored", WI_STAT_IGNORED},
	[WI_OUT_QUARANTINED] = {"quarantined", WI_STAT_QUARANTINED},
	[WI_OUT_UNORDERABLE] = {"unorderable", WI_STAT_UNORDERABLE},
	[WI_OUT_FENCED] = {"fenced", WI_STAT_FENCED},
	[WI_OUT_TOMBSTONE] = {"tombstone", WI_STAT_TOMBSTONES},
	[WI_OUT_RETRY] = {"retry", WI_STAT_RETRIES},
	[WI_OUT_DEFERRED] = {"deferred", WI_STAT_DEFERRED},
	[WI_OUT_NEED_FETCH] = {"need_fetch", -1},
	[WI_OUT_TAKEN] = {"taken", -1},
	[WI_OUT_REVIVED] = {"revived", WI_STAT_REVIVED},
	[WI_OUT_HIDDEN] = {"hidden", WI_STAT_HIDDEN},
};

WiOutcome
wi_outcome_from_name(const char *name)
{
	if (name != NULL)
		for (int i = 0; i < WI_OUT__COUNT; i++)
			if (strcmp(outcomes[i].name, name) == 0)
				return (WiOutcome) i;
	elog(ERROR, "webhook_inbox: unknown outcome \"%s\"", name ? name : "(null)");
	pg_unreachable();
}

const char *
wi_outcome_name(WiOutcome outcome)
{
	return outcomes[outcome].name;
}

void
wi_outcome_count(WiOutcome outcome, uint64 n)
{
	if (outcomes[outcome].stat >= 0)
		wi_stat_add((WiStat) outcomes[outcome].stat, n);
}
