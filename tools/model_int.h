/*
 * model_int.h
 *		What the files of the simulator's model share among themselves
 *		(model.c the store and scenario, model_types.c the object types'
 *		names, model_render.c the objects as the APIs show them,
 *		model_events.c the events, model_lifecycle.c the changes).  Not for
 *		the rest of webhook-sim: it uses model.h.
 *
 * The files call one way: model_lifecycle.c -> model_events.c ->
 * model_render.c -> model_types.c, and model_lifecycle.c -> model.c.
 */
#ifndef SIM_MODEL_INT_H
#define SIM_MODEL_INT_H

#include "model.h"
#include "../extension/adapters/shopify_graphql.h"

/* Each object type's statuses, in the order of model_types.c's names. */
enum
{
	SUB_INCOMPLETE, SUB_INCOMPLETE_EXPIRED, SUB_TRIALING, SUB_ACTIVE, SUB_PAST_DUE,
	SUB_CANCELED, SUB_UNPAID, SUB_PAUSED
};

enum
{
	PI_RPM, PI_RC, PI_ACTION, PI_PROCESSING, PI_CAPTURE, PI_SUCCEEDED, PI_CANCELED
};

enum
{
	INV_DRAFT, INV_OPEN, INV_PAID, INV_UNCOLLECTIBLE, INV_VOID
};

enum
{
	CS_OPEN, CS_COMPLETE, CS_EXPIRED
};

enum
{
	ORD_PENDING, ORD_AUTHORIZED, ORD_PAID, ORD_PARTIAL, ORD_REFUNDED, ORD_VOIDED
};

enum
{
	GH_OPEN, GH_CLOSED
};

enum
{
	RE_PENDING, RE_SUCCEEDED, RE_FAILED, RE_CANCELED
};

enum
{
	DP_WARN_NEEDS, DP_WARN_REVIEW, DP_WARN_CLOSED, DP_NEEDS, DP_REVIEW, DP_WON, DP_LOST
};

enum
{
	CH_PENDING, CH_SUCCEEDED, CH_FAILED
};

#define MAX_PI_ATTEMPTS 3
#define STRIPE_API_VERSION "2024-06-20"
/* X-Shopify-API-Version of deliveries: the version the adapter speaks */
#define SHOPIFY_API_VERSION SHOPIFY_GQL_API_VERSION

/* model.c */
extern void make_id(sim_model *m, sim_rng *r, sim_object *o, long k);

/* model_render.c: a GitHub pull request (render_gh_issue is in model.h) */
extern void render_gh_pull(const sim_model *m, sbuf *out, const sim_object *o);

/* model_events.c */
extern void emit_event(sim_model *m, long k, const char *type);
extern void store_event(sim_model *m, const char *id, const char *type, int source, int account,
						int64_t created, const char *body);
extern void stripe_event_json(sbuf *b, const char *id, const char *account, const char *type,
							  int64_t created, const char *object_json, const char *idem_key);

#endif							/* SIM_MODEL_INT_H */
