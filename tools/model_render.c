/*
 * model_render.c
 *		The model's objects as Stripe's, Shopify's and GitHub's APIs show
 *		them (see model.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"

/* ---------- rendering ---------- */

static void
render_money(sbuf *out, int64_t minor)
{
	sb_printf(out, "\"%lld.%02lld\"", (long long) (minor / 100), (long long) (minor % 100));
}

static void
render_ts_or_null(sbuf *out, const char *name, int set, int64_t t)
{
	if (set)
		sb_printf(out, ",\"%s\":%lld", name, (long long) t);
	else
		sb_printf(out, ",\"%s\":null", name);
}

static void
render_metadata(sbuf *out, const sim_object *o)
{
	sb_printf(out, ",\"metadata\":{%s}", o->metadata);
}

static const char *
id_of(const sim_model *m, long k)
{
	return k >= 0 ? m->objs[k].id : NULL;
}

static void
render_ref(sbuf *out, const char *name, const char *id)
{
	if (id)
		sb_printf(out, ",\"%s\":\"%s\"", name, id);
	else
		sb_printf(out, ",\"%s\":null", name);
}

const char *
model_gh_repo(const sim_model *m, const sim_object *o)
{
	return o->repo >= 0 && o->repo < m->nrepos ? m->repos[o->repo] : m->repo;
}

/* GitHub's user and repository objects, as the webhook and API payloads carry them. */
static void
render_gh_user(sbuf *out, const char *name)
{
	sb_printf(out, ",\"%s\":{\"login\":\"octocat\",\"id\":583231,\"node_id\":\"MDQ6VXNlcjU4MzIzMQ==\","
			  "\"type\":\"User\",\"site_admin\":false,\"url\":\"https://api.github.com/users/octocat\"}", name);
}

static void
render_gh_times(sbuf *out, const sim_object *o)
{
	char		c[40],
				u[40],
				x[40];

	iso_time(o->created, 1, c, sizeof(c));
	iso_time(o->updated_at, 1, u, sizeof(u));
	sb_printf(out, ",\"created_at\":\"%s\",\"updated_at\":\"%s\"", c, u);
	if (o->status == GH_CLOSED)
	{
		iso_time(o->updated_at, 1, x, sizeof(x));
		sb_printf(out, ",\"closed_at\":\"%s\"", x);
	}
	else
		sb_puts(out, ",\"closed_at\":null");
}

/*
 * An issue as GET /repos/{owner}/{repo}/issues shows it (the openapi
 * schema "issue"); a pull request appears there too, with its issue id and
 * a pull_request member.
 */
void
render_gh_issue(const sim_model *m, sbuf *out, const sim_object *o)
{
	long long	id = o->type == OT_PULL ? (long long) o->alt_id : atoll(o->id);
	const char *repo = model_gh_repo(m, o);
	const char *reason = o->status == GH_OPEN ? (o->attempts ? "\"reopened\"" : "null") :
	o->quantity % 3 == 0 ? "\"not_planned\"" : "\"completed\"";

	sb_printf(out, "{\"id\":%lld,\"node_id\":\"I_kwDO%lld\",\"number\":%ld,"
			  "\"url\":\"https://api.github.com/repos/%s/issues/%ld\","
			  "\"repository_url\":\"https://api.github.com/repos/%s\","
			  "\"labels_url\":\"https://api.github.com/repos/%s/issues/%ld/labels{/name}\","
			  "\"comments_url\":\"https://api.github.com/repos/%s/issues/%ld/comments\","
			  "\"events_url\":\"https://api.github.com/repos/%s/issues/%ld/events\","
			  "\"html_url\":\"https://github.com/%s/%s/%ld\","
			  "\"title\":\"%s %ld (rev %d)\",\"state\":\"%s\",\"state_reason\":%s,\"locked\":false,"
			  "\"assignee\":null,\"assignees\":[],\"milestone\":null,\"comments\":%d,"
			  "\"author_association\":\"MEMBER\",\"body\":null",
			  id, id, o->number, repo, o->number, repo, repo, o->number,
			  repo, o->number, repo, o->number, repo,
			  o->type == OT_PULL ? "pull" : "issues", o->number,
			  o->type == OT_PULL ? "Change" : "Issue", o->number, o->quantity,
			  obj_status_name(o), o->type == OT_PULL ? "null" : reason, o->quantity);
	if (o->currency)
		sb_puts(out, ",\"labels\":[{\"id\":208045946,\"node_id\":\"MDU6TGFiZWwyMDgwNDU5NDY=\","
				"\"name\":\"bug\",\"color\":\"f29513\",\"default\":true,\"description\":null}]");
	else
		sb_puts(out, ",\"labels\":[]");
	render_gh_user(out, "user");
	render_gh_times(out, o);
	if (o->type == OT_PULL)
	{
		char		mt[40];

		iso_time(o->updated_at, 1, mt, sizeof(mt));
		sb_printf(out, ",\"pull_request\":{\"url\":\"https://api.github.com/repos/%s/pulls/%ld\","
				  "\"html_url\":\"https://github.com/%s/pull/%ld\","
				  "\"diff_url\":\"https://github.com/%s/pull/%ld.diff\","
				  "\"patch_url\":\"https://github.com/%s/pull/%ld.patch\",\"merged_at\":",
				  repo, o->number, repo, o->number, repo, o->number, repo, o->number);
		if (o->captured)
			sb_printf(out, "\"%s\"}", mt);
		else
			sb_puts(out, "null}");
	}
	sb_putc(out, '}');
}

/* A pull request as GET /repos/{owner}/{repo}/pulls/{n} shows it. */
void
render_gh_pull(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *repo = model_gh_repo(m, o);
	char		mt[40];

	iso_time(o->updated_at, 1, mt, sizeof(mt));
	sb_printf(out, "{\"id\":%s,\"node_id\":\"PR_kwDO%s\",\"number\":%ld,"
			  "\"url\":\"https://api.github.com/repos/%s/pulls/%ld\","
			  "\"html_url\":\"https://github.com/%s/pull/%ld\","
			  "\"issue_url\":\"https://api.github.com/repos/%s/issues/%ld\","
			  "\"state\":\"%s\",\"locked\":false,\"title\":\"Change %ld (rev %d)\",\"body\":null,"
			  "\"draft\":false,\"merged\":%s,\"merge_commit_sha\":null,"
			  "\"head\":{\"label\":\"octocat:change-%ld\",\"ref\":\"change-%ld\",\"sha\":\"%040ld\"},"
			  "\"base\":{\"label\":\"%s:main\",\"ref\":\"main\",\"sha\":\"%040d\"},"
			  "\"author_association\":\"MEMBER\",\"labels\":[],\"assignee\":null,\"assignees\":[],"
			  "\"requested_reviewers\":[],\"milestone\":null,\"auto_merge\":null,\"mergeable\":null,"
			  "\"mergeable_state\":\"unknown\",\"maintainer_can_modify\":false,\"merged_by\":null,"
			  "\"comments\":0,\"review_comments\":0,\"commits\":1,\"additions\":%d,\"deletions\":0,"
			  "\"changed_files\":1",
			  o->id, o->id, o->number, repo, o->number, repo, o->number, repo, o->number,
			  obj_status_name(o), o->number, o->quantity, o->captured ? "true" : "false",
			  o->number, o->number, (long) o->number * 7919 + o->quantity, repo, 0, 1 + o->quantity);
	sb_printf(out, ",\"diff_url\":\"https://github.com/%s/pull/%ld.diff\","
			  "\"patch_url\":\"https://github.com/%s/pull/%ld.patch\","
			  "\"commits_url\":\"https://api.github.com/repos/%s/pulls/%ld/commits\","
			  "\"review_comments_url\":\"https://api.github.com/repos/%s/pulls/%ld/comments\","
			  "\"review_comment_url\":\"https://api.github.com/repos/%s/pulls/comments{/number}\","
			  "\"comments_url\":\"https://api.github.com/repos/%s/issues/%ld/comments\","
			  "\"statuses_url\":\"https://api.github.com/repos/%s/statuses/%040ld\","
			  "\"_links\":{\"self\":{\"href\":\"https://api.github.com/repos/%s/pulls/%ld\"},"
			  "\"html\":{\"href\":\"https://github.com/%s/pull/%ld\"}}",
			  repo, o->number, repo, o->number, repo, o->number, repo, o->number,
			  repo, repo, o->number, repo, (long) o->number * 7919 + o->quantity,
			  repo, o->number, repo, o->number);
	render_gh_user(out, "user");
	render_gh_times(out, o);
	if (o->captured)
		sb_printf(out, ",\"merged_at\":\"%s\"}", mt);
	else
		sb_puts(out, ",\"merged_at\":null}");
}

static void
render_subscription(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	(void) m;
	sb_printf(out, "{\"id\":\"%s\",\"object\":\"subscription\",\"status\":\"%s\","
			  "\"customer\":\"%s\",\"quantity\":%d,\"currency\":\"%s\",\"created\":%lld,"
			  "\"start_date\":%lld,\"livemode\":false,\"cancel_at_period_end\":false",
			  o->id, st, o->customer, o->quantity, currency_name(o),
			  (long long) o->created, (long long) o->created);
	render_ts_or_null(out, "canceled_at", o->status == SUB_CANCELED, o->updated_at);
	render_ts_or_null(out, "ended_at", o->status == SUB_CANCELED ||
					  o->status == SUB_INCOMPLETE_EXPIRED, o->updated_at);
	sb_printf(out, ",\"pause_collection\":%s",
			  o->status == SUB_PAUSED ? "{\"behavior\":\"void\",\"resumes_at\":null}" : "null");
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_pi(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	sb_printf(out, "{\"id\":\"%s\",\"object\":\"payment_intent\",\"status\":\"%s\","
			  "\"amount\":%lld,\"amount_capturable\":%lld,\"amount_received\":%lld,"
			  "\"currency\":\"%s\",\"customer\":\"%s\",\"created\":%lld,\"livemode\":false,"
			  "\"capture_method\":\"%s\"",
			  o->id, st, (long long) o->amount,
			  (long long) (o->status == PI_CAPTURE ? o->amount : 0),
			  (long long) (o->status == PI_SUCCEEDED ? o->amount : 0),
			  currency_name(o), o->customer, (long long) o->created,
			  o->quantity ? "manual" : "automatic");
	render_ref(out, "latest_charge", id_of(m, o->charge));
	if (o->status == PI_RPM && o->attempts > 0)
		sb_puts(out, ",\"last_payment_error\":{\"type\":\"card_error\",\"code\":\"card_declined\","
				"\"decline_code\":\"generic_decline\",\"message\":\"Your card was declined.\"}");
	else
		sb_puts(out, ",\"last_payment_error\":null");
	render_ts_or_null(out, "canceled_at", o->status == PI_CANCELED, o->updated_at);
	sb_printf(out, ",\"cancellation_reason\":%s",
			  o->status == PI_CANCELED ? "\"abandoned\"" : "null");
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_invoice(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	(void) m;
	sb_printf(out, "{\"id\":\"%s\",\"object\":\"invoice\",\"status\":\"%s\","
			  "\"customer\":\"%s\",\"currency\":\"%s\",\"amount_due\":%lld,\"amount_paid\":%lld,"
			  "\"amount_remaining\":%lld,\"attempt_count\":%d,\"created\":%lld,\"livemode\":false,"
			  "\"collection_method\":\"charge_automatically\"",
			  o->id, st, o->customer, currency_name(o), (long long) o->amount,
			  (long long) (o->status == INV_PAID ? o->amount : 0),
			  (long long) (o->status == INV_PAID || o->status == INV_VOID ? 0 : o->amount),
			  o->attempts, (long long) o->created);
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_customer(const sim_model *m, sbuf *out, const sim_object *o)
{
	(void) m;
	if (o->deleted)
	{
		sb_printf(out, "{\"id\":\"%s\",\"object\":\"customer\",\"deleted\":true}", o->id);
		return;
	}
	sb_printf(out, "{\"id\":\"%s\",\"object\":\"customer\",\"created\":%lld,\"livemode\":false,"
			  "\"balance\":%lld,\"currency\":\"%s\",\"email\":\"%s@example.com\",\"name\":null,"
			  "\"delinquent\":false",
			  o->id, (long long) o->created, (long long) o->amount, currency_name(o),
			  o->id + 4);
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_checkout(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	(void) m;
	sb_printf(out, "{\"id\":\"%s\",\"object\":\"checkout.session\",\"status\":\"%s\","
			  "\"payment_status\":\"%s\",\"mode\":\"payment\",\"amount_total\":%lld,"
			  "\"currency\":\"%s\",\"customer\":\"%s\",\"created\":%lld,\"expires_at\":%lld,"
			  "\"livemode\":false,\"url\":null",
			  o->id, st, o->status == CS_COMPLETE ? "paid" : "unpaid",
			  (long long) o->amount, currency_name(o), o->customer,
			  (long long) o->created, (long long) (o->created + 86400));
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_refund(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	sb_printf(out, "{\"id\":\"%s\",\"object\":\"refund\",\"amount\":%lld,\"currency\":\"%s\","
			  "\"payment_intent\":\"%s\",\"status\":\"%s\",\"created\":%lld,\"reason\":%s",
			  o->id, (long long) o->amount, currency_name(o), id_of(m, o->parent), st,
			  (long long) o->created,
			  o->quantity ? "\"requested_by_customer\"" : "null");
	render_ref(out, "charge", id_of(m, o->charge));
	sb_printf(out, ",\"failure_reason\":%s",
			  o->status == RE_FAILED ? "\"lost_or_stolen_card\"" : "null");
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_dispute(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	sb_printf(out, "{\"id\":\"%s\",\"object\":\"dispute\",\"amount\":%lld,\"currency\":\"%s\","
			  "\"payment_intent\":\"%s\",\"status\":\"%s\",\"reason\":\"fraudulent\","
			  "\"created\":%lld,\"livemode\":false,\"is_charge_refundable\":false",
			  o->id, (long long) o->amount, currency_name(o), id_of(m, o->parent), st,
			  (long long) o->created);
	render_ref(out, "charge", id_of(m, o->charge));
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_charge(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);

	sb_printf(out, "{\"id\":\"%s\",\"object\":\"charge\",\"amount\":%lld,\"amount_captured\":%lld,"
			  "\"amount_refunded\":%lld,\"captured\":%s,\"refunded\":%s,\"paid\":%s,"
			  "\"currency\":\"%s\",\"customer\":\"%s\",\"payment_intent\":\"%s\",\"status\":\"%s\","
			  "\"created\":%lld,\"livemode\":false,\"failure_code\":%s",
			  o->id, (long long) o->amount,
			  (long long) (o->captured ? o->amount : 0),
			  (long long) o->amount_refunded, o->captured ? "true" : "false",
			  o->amount_refunded >= o->amount ? "true" : "false",
			  o->status == CH_SUCCEEDED ? "true" : "false",
			  currency_name(o), o->customer, id_of(m, o->parent), st,
			  (long long) o->created,
			  o->status == CH_FAILED ? "\"card_declined\"" : "null");
	render_metadata(out, o);
	sb_putc(out, '}');
}

static void
render_order(const sim_model *m, sbuf *out, const sim_object *o)
{
	const char *st = obj_status_name(o);
	char		iso1[40],
				iso2[40];

	(void) m;
	iso_time(o->created, 0, iso1, sizeof(iso1));
	iso_time(o->updated_at, 0, iso2, sizeof(iso2));
	sb_printf(out, "{\"id\":%s,\"admin_graphql_api_id\":\"gid://shopify/Order/%s\",\"name\":\"#%ld\","
			  "\"created_at\":\"%s\",\"updated_at\":\"%s\",\"financial_status\":\"%s\",\"total_price\":",
			  o->id, o->id, o->number, iso1, iso2, st);
	render_money(out, o->amount);
	sb_printf(out, ",\"currency\":\"%s\"", currency_name(o));
	if (o->status == ORD_VOIDED)
		sb_printf(out, ",\"cancelled_at\":\"%s\"", iso2);
	else
		sb_puts(out, ",\"cancelled_at\":null");
	sb_puts(out, ",\"closed_at\":null");
	sb_putc(out, '}');
}

/* Each object type as its API renders it, closing brace included. */
static void (*const renderers[OT__COUNT]) (const sim_model *m, sbuf *out, const sim_object *o) = {
	[OT_SUB] = render_subscription,
	[OT_PI] = render_pi,
	[OT_INVOICE] = render_invoice,
	[OT_CUSTOMER] = render_customer,
	[OT_CHECKOUT] = render_checkout,
	[OT_ISSUE] = render_gh_issue,
	[OT_PULL] = render_gh_pull,
	[OT_ORDER] = render_order,
	[OT_REFUND] = render_refund,
	[OT_DISPUTE] = render_dispute,
	[OT_CHARGE] = render_charge,
};

/*
 * The object as Stripe's (or Shopify's) API shows it: the fields the
 * official SDK types declare for what this simulator models.
 */
void
render_object(const sim_model *m, sbuf *out, const sim_object *o)
{
	renderers[o->type](m, out, o);
}
