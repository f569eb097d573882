/*
 * give_back.c
 *		Handing a claim back (_give_back()): retried with backoff and
 *		quarantined after max_attempts, deferred without an attempt, or
 *		quarantined at once, each in a step of its own, with what it did
 *		counted once that step committed.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "give_back.h"
#include "outcome.h"
#include "stats.h"
#include "step.h"

/* as _give_back() takes them, in GiveBack order */
static const char *const give_back_names[] = {"retry", "defer", "quarantine", "auth"};

typedef struct GiveBackStep
{
	int64		token;
	GiveBack	how;
	const char *reason;
	double		delay_s;		/* < 0: retry()'s own backoff */
	int			http;
	WiOutcome	result;
} GiveBackStep;

static void
give_back_xact(void *arg)
{
	GiveBackStep *g = (GiveBackStep *) arg;
	Oid			t[5] = {INT8OID, TEXTOID, TEXTOID, FLOAT8OID, INT4OID};
	Datum		v[5];
	char		nl[5] = {' ', ' ', ' ', ' ', ' '};

	v[0] = Int64GetDatum(g->token);
	v[1] = CStringGetTextDatum(give_back_names[g->how]);
	v[2] = g->reason ? CStringGetTextDatum(g->reason) : (Datum) 0;
	nl[2] = g->reason ? ' ' : 'n';
	v[3] = Float8GetDatum(g->delay_s);
	v[4] = Int32GetDatum(g->http);
	wi_spi_exec("SELECT webhook_inbox._give_back($1, $2, $3, $4, $5)", 5, t, v, nl, SPI_OK_SELECT);
	g->result = wi_outcome_from_name(wi_spi_first_text());
}

/*
 * wi_give_back
 *		Hands a claim back in a step of its own, and counts what that did.
 */
void
wi_give_back(const WiSteps *steps, int64 token, GiveBack how, const char *reason,
			 double delay_s, int http)
{
	GiveBackStep g = {token, how, reason, delay_s, http, WI_OUT_FENCED};

	if (wi_step_run(steps, give_back_xact, &g) != NULL)
		return;					/* logged; the lease expires and the claim returns */
	if (how == GIVE_AUTH)
		wi_stat_add(WI_STAT_AUTH_REFUSED, 1);
	wi_outcome_count(g.result, 1);
}
