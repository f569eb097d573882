/*
 * model.h
 *		The simulated provider's state: objects with their providers' real
 *		lifecycles, the Stripe events store, and the deterministic scenario
 *		generator that changes objects and emits the webhook events of each
 *		change.
 *
 * Object shapes, statuses and event type names follow the providers'
 * official SDKs (stripe-node's resource types such as Subscription.Status,
 * PaymentIntent.Status and Event.Type; Shopify's Admin REST Order).
 *
 * Everything that reaches an event body derives from the seed, the flags and
 * a synthetic clock starting at the scenario epoch (--epoch), so one seed and
 * one epoch give one byte-exact stream.
 */
#ifndef SIM_MODEL_H
#define SIM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "sign.h"
#include "util.h"

/*
 * Object types.  The first OT_ROOT_COUNT are created from the initial
 * population (--objects); refunds, disputes and charges are children of a
 * PaymentIntent, created as its lifecycle goes.
 */
typedef enum obj_type
{
	OT_SUB,
	OT_PI,
	OT_INVOICE,
	OT_CUSTOMER,
	OT_CHECKOUT,
	OT_ISSUE,
	OT_PULL,
	OT_ORDER,
	OT_REFUND,
	OT_DISPUTE,
	OT_CHARGE,
	OT__COUNT
} obj_type;

#define OT_ROOT_COUNT (OT_ORDER + 1)

#define SIM_ID_LEN 56
#define SIM_META_LEN 512
#define MAX_CHILD_PER_PI 3
#define STRIPE_EVENT_RETENTION (30 * 86400)

typedef struct sim_object
{
	obj_type	type;
	int			source;			/* index into model sources */
	char		id[SIM_ID_LEN];
	int			exists;			/* created (visible) yet */
	int			deleted;		/* customers and orders only */
	int			status;			/* index into the type's status names */
	int64_t		created;		/* synthetic seconds */
	int64_t		updated_at;		/* synthetic seconds; the order version */
	int64_t		amount;			/* minor units */
	int64_t		amount_refunded;	/* PaymentIntents: sum of their refunds */
	int			quantity;
	int			currency;
	int			attempts;		/* PaymentIntents: failed payment attempts */
	int			n_child;		/* PaymentIntents: refunds and disputes */
	int			captured;		/* charges */
	long		parent;			/* child types: index of the PaymentIntent */
	long		charge;			/* PaymentIntents: latest charge, or -1 */
	long		pos;			/* position in the type's creation order */
	long		number;			/* order number (#1001 …), issue/pull number */
	int64_t		alt_id;			/* pull requests: the id of their issue */
	int			repo;			/* GitHub: index into the model's repos */
	int			account;		/* Stripe Connect: 1 + index into the model's
								 * accounts; 0: the platform's own */
	char		customer[40];
	char		metadata[SIM_META_LEN];	/* rendered JSON object members, or "" */
} sim_object;

/* One Stripe event as /v1/events lists it. */
typedef struct sim_stored_event
{
	char		id[40];
	char		type[64];
	int			source;
	int64_t		created;		/* synthetic seconds, as in the body */
	int			account;		/* as sim_object.account */
	char	   *body;			/* the exact event JSON */
} sim_stored_event;

#define SIM_ACCOUNT_ID_LEN 32

/* One generated webhook event (the caller frees with sim_event_free). */
typedef struct sim_event
{
	long		seq;			/* 1-based */
	int			source;
	char		event_id[64];
	char		type[64];		/* Stripe type, Shopify topic, … */
	const char *object_type;	/* subscription, payment_intent, order, … */
	char		object_id[SIM_ID_LEN];
	char		account[32];	/* Stripe Connect: the object's account, or "" */
	hdr_list	headers;		/* provider headers, signatures excluded */
	char	   *body;
	size_t		body_len;
} sim_event;

#define SIM_MAX_QUEUE 8

#define SIM_MAX_REPOS 8

typedef struct sim_model
{
	uint64_t	seed;
	long		target_events;
	double		thin_share;
	int64_t		epoch;
	int			follow_wall;	/* live mode: the clock never lags real time */
	sim_source *sources;
	int			nsources;
	int			src_for[OT__COUNT];	/* source index per type, -1 if none */
	char		repo[128];		/* GitHub owner/name: the first of repos */
	char		repos[SIM_MAX_REPOS][128];	/* --github-repo A/B,C/D: objects spread over them */
	int			nrepos;
	long		gh_number;		/* last issue/pull number of the repository */

	sim_rng		rng;			/* scenario */
	sim_rng		effect_rng;		/* ids of effect-created refunds */
	int64_t		clock;			/* synthetic seconds */
	long		seq;
	long		changes;		/* changes applied, silent ones included */

	sim_object *objs;
	long		nobjs;			/* root population, then children */
	long		nroots;
	long		cap;
	long		ncreated;		/* roots [0, ncreated) exist or existed */
	id_map		obj_ids;

	/* per type: indices in creation order (Stripe lists newest first) */
	long	   *order[OT__COUNT];
	long		norder[OT__COUNT];
	long		order_cap[OT__COUNT];
	/* orders: indices by id ascending (Shopify lists by id) */
	long	   *by_id;
	long		nby_id;

	sim_stored_event *events;
	long		nevents;
	long		events_cap;
	id_map		event_ids;

	/* Stripe Connect: the connected accounts that own the Stripe objects */
	int			naccounts;
	char		(*accounts)[SIM_ACCOUNT_ID_LEN];
	int64_t    *account_created;

	/* a Shopify app: the shops that own the Shopify objects (their account field) */
	int			nshops;
	char		(*shops)[64];
	/* the first old_orders orders were created 61 to 400 days before the epoch */
	long		old_orders;

	/* events of one change beyond the first, delivered next */
	sim_event	queue[SIM_MAX_QUEUE];
	int			nqueue;
} sim_model;

/*
 * Build the object population for nobjects root objects.  Types are drawn
 * among the enabled ones (types_mask, a bit per obj_type) that have a source:
 * Stripe types need --stripe (subscriptions also --standard), orders
 * --shopify, issues and pull requests --github (in repository repo).  Child types (refund, dispute, charge) are created only when
 * enabled.  Nothing exists until the generator creates it.
 */
extern void model_init(sim_model *m, uint64_t seed, long nobjects,
					   long nevents, double thin_share, int64_t epoch,
					   unsigned types_mask, const char *repo,
					   sim_source *sources, int nsources);
extern void model_free(sim_model *m);

/*
 * Stripe Connect: n connected accounts (acct_…, drawn from the seed apart
 * from the scenario's stream) own every Stripe object, root objects spread
 * over them in turn, children with their PaymentIntent; the platform owns
 * none.  Call after model_init, before the first event.  Every event of an
 * account carries its top-level "account" (and a thin event its "context").
 */
extern void model_set_connect(sim_model *m, int n);

/*
 * A Shopify app: n shops (shop-1.myshopify.com …) own every Shopify object,
 * root objects spread over them in turn; each delivery carries its shop's
 * X-Shopify-Shop-Domain.  Call after model_init, before the first event.
 */
extern void model_set_shops(sim_model *m, int n);
/* The shop domain of a Shopify object's account field, or NULL: no shops. */
extern const char *model_shop_domain(const sim_model *m, int account);
/* The tenant that owns o (its Connect account or its shop), "" for the source's own. */
extern const char *model_tenant_of(const sim_model *m, const sim_object *o);
/* The account field of a shop domain, -1 if unknown. */
extern int	model_shop_of(const sim_model *m, const char *domain);

/* The account id of an object's or event's account field, or NULL: the platform. */
extern const char *model_account_id(const sim_model *m, int account);
/* The account field of an account id ("acct_…"), 0 for NULL or "", -1 if unknown. */
extern int	model_account_of(const sim_model *m, const char *id);

/*
 * Whether the model generates events for sources of kind k (Stripe, Shopify,
 * Standard Webhooks, GitHub); serve takes only those, replay every kind.
 */
extern bool model_has_events(sign_kind k);

/* Bit mask of the types named in a comma-separated list; 0 on a bad name. */
extern unsigned model_parse_types(const char *list);
extern unsigned model_default_types(void);

/*
 * Apply the next scenario change and describe its event in ev.  Returns 1,
 * or 0 once target_events are generated or no object can change any more.
 * A change may also be silent (Stripe sends no event for it: a
 * PaymentIntent getting a payment method, a Checkout Session being created);
 * it is applied without returning.
 */
extern int	model_next_event(sim_model *m, sim_event *ev);
extern void sim_event_free(sim_event *ev);

/* Record line (JSONL, with the newline) of an event. */
extern void event_record_line(const sim_model *m, const sim_event *ev, sbuf *out);

/* Stripe object name ("subscription", "checkout.session", "order" …). */
extern const char *obj_type_name(obj_type t);
/* API path of the type's collection ("subscriptions", "checkout/sessions"). */
extern const char *obj_type_path(obj_type t);
extern int	obj_type_is_occurrence(obj_type t);
/* Status name, or NULL for types without one (customers). */
extern const char *obj_status_name(const sim_object *o);
extern const char *currency_name(const sim_object *o);

/* Lookup among existing objects; -1 when unknown or not created yet. */
extern long model_find_object(const sim_model *m, obj_type t, const char *id);

/* API JSON of an object (a deleted customer as Stripe shows it). */
extern void render_object(const sim_model *m, sbuf *out, const sim_object *o);
/* A GitHub issue or pull request as the issues API shows it. */
extern void render_gh_issue(const sim_model *m, sbuf *out, const sim_object *o);
/* GitHub: the owner/name of an issue's or pull request's repository */
extern const char *model_gh_repo(const sim_model *m, const sim_object *o);

/*
 * Create a refund (an API effect) of amount on PaymentIntent pi, with the
 * rendered metadata members; stores its refund.created event in the events
 * store (it is not delivered).  Returns the object index.
 */
extern long model_effect_refund(sim_model *m, long pi, int64_t amount,
								const char *metadata, const char *reason);

/* Id ordering of Shopify lists: shorter first, then bytewise. */
extern int	id_cmp(const char *a, const char *b);

#endif							/* SIM_MODEL_H */
