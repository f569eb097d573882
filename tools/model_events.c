/*
 * model_events.c
 *		The model's webhook events: the delivery queue and the Stripe events
 *		store (see model.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"

/* ---------- event construction ---------- */

static sim_event *
queue_slot(sim_model *m)
{
	sim_event  *ev;

	if (m->nqueue == SIM_MAX_QUEUE)
	{
		fprintf(stderr, "webhook-sim: event queue overflow\n");
		abort();
	}
	ev = &m->queue[m->nqueue++];
	memset(ev, 0, sizeof(*ev));
	return ev;
}

void
store_event(sim_model *m, const char *id, const char *type, int source, int account,
			int64_t created, const char *body)
{
	sim_stored_event *se;

	if (m->nevents == m->events_cap)
	{
		m->events_cap = m->events_cap ? m->events_cap * 2 : 256;
		m->events = xrealloc(m->events, (size_t) m->events_cap * sizeof(sim_stored_event));
	}
	se = &m->events[m->nevents];
	snprintf(se->id, sizeof(se->id), "%s", id);
	snprintf(se->type, sizeof(se->type), "%s", type);
	se->source = source;
	se->account = account;
	se->created = created;
	se->body = xstrdup(body);
	idmap_put(&m->event_ids, se->id, m->nevents);
	m->nevents++;
}

/* A Stripe v1 snapshot event's JSON, as delivered and as /v1/events lists it. */
void
stripe_event_json(sbuf *b, const char *id, const char *account, const char *type, int64_t created,
				  const char *object_json, const char *idem_key)
{
	sb_printf(b, "{\"id\":\"%s\",\"object\":\"event\",", id);
	/* a connected account's event names it (Event.account) */
	if (account)
		sb_printf(b, "\"account\":\"%s\",", account);
	sb_printf(b, "\"api_version\":\"%s\",\"created\":%lld,"
			  "\"data\":{\"object\":%s},\"livemode\":false,\"pending_webhooks\":1,"
			  "\"request\":{\"id\":null,\"idempotency_key\":",
			  STRIPE_API_VERSION, (long long) created, object_json);
	if (idem_key)
		sb_json_str(b, idem_key);
	else
		sb_puts(b, "null");
	sb_printf(b, "},\"type\":\"%s\"}", type);
}

/*
 * Queue the webhook of a change of object k: a Stripe snapshot event (also
 * kept in the events store), a thin event for a share of subscription
 * events, or the Standard Webhooks or Shopify message of its source.
 */
void
emit_event(sim_model *m, long k, const char *type)
{
	sim_object *o = &m->objs[k];
	const sim_source *src = &m->sources[o->source];
	sim_event  *ev = queue_slot(m);
	char		tok[32],
				iso[40];
	sbuf		obj,
				b;

	sb_init(&obj);
	sb_init(&b);
	ev->source = o->source;
	snprintf(ev->account, sizeof(ev->account), "%s",
			 src->kind == WI_KIND_shopify ? (model_shop_domain(m, o->account) ? model_shop_domain(m, o->account) : "")
			 : model_account_id(m, o->account) ? model_account_id(m, o->account) : "");
	ev->object_type = obj_type_name(o->type);
	snprintf(ev->object_id, sizeof(ev->object_id), "%s", o->id);
	iso_time(m->clock, 1, iso, sizeof(iso));
	if (src->kind == WI_KIND_shopify)
	{
		char		uuid[40],
					domain[128];

		rng_uuid(&m->rng, uuid);
		snprintf(ev->event_id, sizeof(ev->event_id), "%s", uuid);
		snprintf(ev->type, sizeof(ev->type), "%s", type);
		hdr_add(&ev->headers, "X-Shopify-Topic", type);
		hdr_add(&ev->headers, "X-Shopify-Webhook-Id", uuid);
		rng_uuid(&m->rng, uuid);
		hdr_add(&ev->headers, "X-Shopify-Event-Id", uuid);
		if (model_shop_domain(m, o->account))
			snprintf(domain, sizeof(domain), "%s", model_shop_domain(m, o->account));
		else
			snprintf(domain, sizeof(domain), "%s.myshopify.com", src->name);
		hdr_add(&ev->headers, "X-Shopify-Shop-Domain", domain);
		hdr_add(&ev->headers, "X-Shopify-Triggered-At", iso);
		hdr_add(&ev->headers, "X-Shopify-API-Version", SHOPIFY_API_VERSION);
		if (o->deleted)
			sb_printf(&b, "{\"id\":%s}", o->id);
		else
			render_object(m, &b, o);
	}
	else if (src->kind == WI_KIND_github)
	{
		/* type is the action; the event name comes from the object type */
		const char *event = o->type == OT_PULL ? "pull_request" : "issues";
		char		uuid[40],
					hook[24];

		rng_uuid(&m->rng, uuid);
		snprintf(ev->event_id, sizeof(ev->event_id), "%s", uuid);
		snprintf(ev->type, sizeof(ev->type), "%s.%s", event, type);
		hdr_add(&ev->headers, "X-GitHub-Event", event);
		hdr_add(&ev->headers, "X-GitHub-Delivery", uuid);
		snprintf(hook, sizeof(hook), "%d", 412345678);
		hdr_add(&ev->headers, "X-GitHub-Hook-ID", hook);
		hdr_add(&ev->headers, "X-GitHub-Hook-Installation-Target-Type", "repository");
		sb_printf(&b, "{\"action\":\"%s\",", type);
		if (o->type == OT_PULL)
		{
			sb_printf(&b, "\"number\":%ld,\"pull_request\":", o->number);
			render_gh_pull(m, &b, o);
		}
		else
		{
			sb_puts(&b, "\"issue\":");
			render_gh_issue(m, &b, o);
		}
		sb_printf(&b, ",\"repository\":{\"id\":1296269,\"node_id\":\"MDEwOlJlcG9zaXRvcnkxMjk2MjY5\","
				  "\"name\":\"%s\",\"full_name\":\"%s\",\"private\":false}",
				  strchr(model_gh_repo(m, o), '/') ? strchr(model_gh_repo(m, o), '/') + 1 : model_gh_repo(m, o),
				  model_gh_repo(m, o));
		sb_puts(&b, ",\"sender\":{\"login\":\"octocat\",\"id\":583231,\"type\":\"User\"}}");
	}
	else if (src->kind == WI_KIND_standard)
	{
		rng_token(&m->rng, tok, 27);
		snprintf(ev->event_id, sizeof(ev->event_id), "msg_%s", tok);
		/* customer.subscription.updated -> subscription.updated */
		snprintf(ev->type, sizeof(ev->type), "subscription.%s", strrchr(type, '.') + 1);
		hdr_add(&ev->headers, "webhook-id", ev->event_id);
		render_object(m, &obj, o);
		sb_printf(&b, "{\"type\":\"%s\",\"timestamp\":\"%s\",\"data\":%s}", ev->type, iso, obj.data);
	}
	else
	{
		int			thin = o->type == OT_SUB && rng_double(&m->rng) < m->thin_share;

		render_object(m, &obj, o);
		rng_token(&m->rng, tok, 24);
		snprintf(ev->event_id, sizeof(ev->event_id), "evt_%s", tok);
		if (thin)
		{
			/* the v1 event exists too (listed by /v1/events), with its own id */
			char		v1id[40];
			sbuf		v1;

			snprintf(ev->type, sizeof(ev->type), "v1.%s", type);
			sb_printf(&b, "{\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":\"%s\",\"created\":\"%s\",",
					  ev->event_id, ev->type, iso);
			/* a thin event names its account by context (Event.context) */
			if (o->account)
				sb_printf(&b, "\"context\":\"%s\",", model_account_id(m, o->account));
			sb_printf(&b, "\"related_object\":{\"id\":\"%s\",\"type\":\"subscription\",\"url\":\"/v1/subscriptions/%s\"}}",
					  o->id, o->id);
			rng_token(&m->rng, tok, 24);
			snprintf(v1id, sizeof(v1id), "evt_%s", tok);
			sb_init(&v1);
			stripe_event_json(&v1, v1id, model_account_id(m, o->account), type, m->clock, obj.data, NULL);
			store_event(m, v1id, type, o->source, o->account, m->clock, v1.data);
			sb_free(&v1);
		}
		else
		{
			snprintf(ev->type, sizeof(ev->type), "%s", type);
			stripe_event_json(&b, ev->event_id, model_account_id(m, o->account), type, m->clock, obj.data, NULL);
			store_event(m, ev->event_id, type, o->source, o->account, m->clock, b.data);
		}
	}
	ev->body_len = b.len;
	ev->body = sb_steal(&b);
	sb_free(&obj);
	sb_free(&b);
}
