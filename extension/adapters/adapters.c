/*
 * adapters.c
 *		The table of provider adapters, and what they share: loading a
 *		source's read-API settings, URL escaping and URL templates.
 *
 * Adding a provider kind is one adapter file (a WiAdapter and its small
 * functions) and one line in the table below.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "provider.h"
#include "webhook_inbox.h"

static const WiAdapter *const adapters[] = {
	&wi_adapter_stripe,
	&wi_adapter_shopify,
	&wi_adapter_github,
	&wi_adapter_generic,
};

/*
 * The adapter of a source: by kind, or the generic URL-template adapter when
 * the source's settings name a fetch_url or list_url (any signing kind may
 * have a read API).  NULL when the source has no read API at all.
 */
const WiAdapter *
wi_adapter_for(const WiSource *src)
{
	if (src == NULL || src->api_base == NULL)
		return NULL;
	if (src->fetch_url != NULL || src->list_url != NULL)
		return &wi_adapter_generic;
	for (int i = 0; i < lengthof(adapters); i++)
		if (strcmp(adapters[i]->kind, src->kind) == 0)
			return adapters[i];
	return NULL;
}

/*
 * A 2xx answer's body in the shape the mirror keeps: as it is, or as the
 * adapter's answer_shape SQL function turns it (a GraphQL answer into the
 * REST shape); NULL when that function finds nothing to keep (the save
 * then treats the answer as unreadable).  Needs the caller's transaction
 * and SPI connection; the result is palloc'd in the current context.
 */
const char *
wi_answer_shape(const WiAdapter *a, const WiSource *src, const char *object_type, const char *body)
{
	const char *fn = a->answer_shape ? a->answer_shape(src) : NULL;
	Oid			t[2] = {TEXTOID, TEXTOID};
	Datum		v[2];

	if (fn == NULL || body == NULL)
		return body;
	v[0] = CStringGetTextDatum(object_type);
	v[1] = CStringGetTextDatum(body);
	wi_spi_exec(psprintf("SELECT %s($1, $2)", fn), 2, t, v, NULL, SPI_OK_SELECT);
	return wi_spi_first_text();
}

static const char *const horizon_kinds[] = {
	[WI_HORIZON_AGE] = "age",
	[WI_HORIZON_EVENTS] = "events",
	[WI_HORIZON_TENANT] = "tenant",
};

PG_FUNCTION_INFO_V1(wi_horizons);

/*
 * _horizons(): every adapter's horizons, one row each (kind, object_type,
 * horizon, days, created_path, lifted_by, description), in the adapters'
 * order: the webhook_inbox.horizons view, which _hidden_why() reads.
 */
Datum
wi_horizons(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < lengthof(adapters); i++)
	{
		const WiHorizon *h = adapters[i]->horizons;

		for (; h != NULL && h->object_type != NULL; h++)
		{
			Datum		v[7];
			bool		n[7] = {false};

			v[0] = CStringGetTextDatum(adapters[i]->kind);
			v[1] = CStringGetTextDatum(h->object_type);
			v[2] = CStringGetTextDatum(horizon_kinds[h->kind]);
			v[3] = Int32GetDatum(h->days);
			n[3] = h->kind == WI_HORIZON_TENANT;
			v[4] = h->created_path ? CStringGetTextDatum(h->created_path) : (Datum) 0;
			n[4] = h->created_path == NULL;
			v[5] = h->lifted_by ? CStringGetTextDatum(h->lifted_by) : (Datum) 0;
			n[5] = h->lifted_by == NULL;
			v[6] = CStringGetTextDatum(h->why);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
		}
	}
	return (Datum) 0;
}
