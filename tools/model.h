/*
 * model.h
 *		The simulated provider's state: objects with lifecycles, occurrences,
 *		and the deterministic scenario generator that changes them and emits
 *		one webhook event per change.
 *
 * Everything that reaches an event body derives from the seed and a
 * synthetic clock starting at SIM_EPOCH, so one seed gives one byte-exact
 * stream.  Only the `updated` field (real wall-clock time of the last change,
 * used by the changed-since list APIs) depends on when the process ran, and it
 * never appears in an event.
 */
#ifndef SIM_MODEL_H
#define SIM_MODEL_H

#include <stdint.h>

#include "sign.h"
#include "util.h"

typedef enum obj_type
{
	OT_SUB,
	OT_PAY,
	OT_ORDER,
	OT__COUNT
} obj_type;

typedef enum occ_kind
{
	OC_REFUND,
	OC_DISPUTE,
	OC__COUNT
} occ_kind;

/* Collections of the list APIs. */
typedef enum coll_id
{
	COLL_SUB,
	COLL_PAY,
	COLL_ORDER,
	COLL_REFUND,
	COLL_DISPUTE,
	COLL__COUNT
} coll_id;

#define SIM_ID_LEN 40

typedef struct sim_object
{
	obj_type	type;
	int			source;			/* index into model sources */
	char		id[SIM_ID_LEN];
	int			exists;			/* created (visible) yet */
	int			deleted;
	int			status;			/* index into the type's status names */
	int64_t		created;		/* synthetic seconds */
	int64_t		updated_at;		/* synthetic seconds; the order version */
	int64_t		updated;		/* wall clock of the last change */
	int64_t		amount;			/* minor units */
	int			quantity;
	int			currency;
	int			n_occ;			/* occurrences generated on a payment */
	long		number;			/* order number (#1001 …) */
	char		customer[40];
} sim_object;

typedef struct sim_occurrence
{
	occ_kind	kind;
	int			source;
	char		id[SIM_ID_LEN];
	long		payment;		/* object index of the payment_intent */
	int64_t		amount;
	int			currency;
	int64_t		created;		/* synthetic, or wall clock for effects */
	int64_t		updated;		/* wall clock */
} sim_occurrence;

/* One generated webhook event (the caller frees with sim_event_free). */
typedef struct sim_event
{
	long		seq;			/* 1-based */
	int			source;
	char		event_id[64];
	char		type[64];		/* Stripe type, Shopify topic, … */
	const char *object_type;	/* subscription, payment, order, refund, … */
	char		object_id[SIM_ID_LEN];
	hdr_list	headers;		/* provider headers, signatures excluded */
	char	   *body;
	size_t		body_len;
} sim_event;

typedef struct sim_model
{
	uint64_t	seed;
	long		target_events;
	double		thin_share;
	sim_source *sources;
	int			nsources;
	int			src_for[OT__COUNT];	/* source index per type, -1 if none */

	sim_rng		rng;			/* scenario */
	sim_rng		effect_rng;		/* ids of effect-created refunds */
	int64_t		clock;			/* synthetic seconds */
	long		seq;

	sim_object *objs;
	long		nobjs;
	long		ncreated;		/* objects [0, ncreated) exist or existed */
	id_map		obj_ids;

	sim_occurrence *occs;
	long		nocc;
	long		occ_cap;
	id_map		occ_ids;

	long	   *sorted[COLL__COUNT];	/* ids ascending */
	long		nsorted[COLL__COUNT];
	int			dirty[COLL__COUNT];
} sim_model;

/*
 * Build the object population for nobjects objects.  Types are drawn among
 * those that have a source (subscriptions need --stripe or --standard,
 * payments --stripe, orders --shopify).  Nothing exists until the generator
 * creates it.
 */
extern void model_init(sim_model *m, uint64_t seed, long nobjects,
					   long nevents, double thin_share,
					   sim_source *sources, int nsources);
extern void model_free(sim_model *m);

/*
 * Apply the next scenario change (stamping `updated` with now) and describe
 * its event in ev.  Returns 1, or 0 once target_events are generated or no
 * object can change any more.
 */
extern int	model_next_event(sim_model *m, int64_t now, sim_event *ev);
extern void sim_event_free(sim_event *ev);

/* Record line (JSONL, with the newline) of an event. */
extern void event_record_line(const sim_model *m, const sim_event *ev, sbuf *out);

extern const char *obj_type_name(obj_type t);
extern const char *occ_kind_name(occ_kind k);
extern const char *obj_status_name(const sim_object *o);
extern const char *currency_name(const sim_object *o);
extern const char *occ_currency_name(const sim_occurrence *c);

/* Lookups among existing things; -1 when unknown or not created yet. */
extern long model_find_object(const sim_model *m, obj_type t, const char *id);
extern long model_find_occ(const sim_model *m, occ_kind k, const char *id);

/* API JSON of an object or occurrence, `updated` included. */
extern void render_object(sbuf *out, const sim_object *o, int with_updated);
extern void render_occurrence(const sim_model *m, sbuf *out,
							  const sim_occurrence *c, int with_updated);
/* List-API tombstone of a deleted object. */
extern void render_tombstone(sbuf *out, const sim_object *o);

/*
 * Page through a collection in id order: entries with updated >= since and
 * id greater than after (NULL: from the start), at most limit of them into
 * out (indices into objs or occs).  *has_more tells whether another entry
 * would follow.  Returns the number written.
 */
extern long model_list(sim_model *m, coll_id c, int64_t since,
					   const char *after, long limit, long *out, int *has_more);

/*
 * Create a refund of amount on payment index pi (an API effect); returns the
 * occurrence index.  The payment's status is not changed.
 */
extern long model_effect_refund(sim_model *m, long pi, int64_t amount, int64_t now);

/* Id ordering of the list APIs: shorter first, then bytewise. */
extern int	id_cmp(const char *a, const char *b);

#endif							/* SIM_MODEL_H */
