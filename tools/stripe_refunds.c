/*
 * stripe_refunds.c
 *		Stripe's POST /v1/refunds (RefundCreateParams), form-encoded with
 *		nested metadata[key]=value, and its Idempotency-Key: the same key and
 *		parameters within idempotency_ttl replay the first answer
 *		(Idempotent-Replayed: true), other parameters get 400
 *		idempotency_error (stripe_api.c's header has the whole contract).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_int.h"
#include "stripe_int.h"

/* ---------- POST /v1/refunds ---------- */

static const char *const refund_params =
"amount charge currency customer expand instructions_email metadata origin payment_intent "
"reason refund_application_fee reverse_transfer";

/* metadata[k]=v members as JSON ("k":"v",…); -1 with the error answered. */
static int
render_metadata_params(struct evhttp_request *req, sim_params *ps, sbuf *out)
{
	int			i,
				nkeys = 0;

	for (i = 0; i < ps->n; i++)
	{
		const char *name = ps->p[i].name;
		size_t		klen;

		if (strncmp(name, "metadata[", 9) != 0)
			continue;
		klen = strlen(name) - 10;
		if (klen > 40 || strlen(ps->p[i].value) > 500 || ++nkeys > 50)
		{
			stripe_msg(req, 400, "parameter_invalid_string", name,
					   "Invalid metadata %s: keys up to 40 characters, values up to 500, at most 50 keys",
					   name);
			return -1;
		}
		if (out->len)
			sb_putc(out, ',');
		{
			char	   *key = xstrndup(name + 9, klen);

			sb_json_str(out, key);
			free(key);
		}
		sb_putc(out, ':');
		sb_json_str(out, ps->p[i].value);
	}
	return 0;
}

void
stripe_handle_refund(sim_api *api, struct evhttp_request *req, const char *path, int account)
{
	sim_model  *m = api->model;
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *key = evhttp_find_header(in, "Idempotency-Key");
	const char *ct = evhttp_find_header(in, "Content-Type");
	size_t		len;
	char	   *body = api_request_body(req, &len);
	sim_params	ps;
	const char *pi_s,
			   *ch_s,
			   *amount_s,
			   *reason;
	int64_t		amount;
	long		k = -1,
				re;
	int64_t		now = now_epoch();
	sbuf		b,
				meta;

	memset(&ps, 0, sizeof(ps));
	sb_init(&b);
	sb_init(&meta);
	if (key && *key)
	{
		long		e = idmap_get(&api->idem_index, key);

		if (e >= 0 && api->idem[e].created + api->idem_ttl > now)
		{
			idem_entry *ie = &api->idem[e];

			if (strcmp(ie->path, path) == 0 && ie->body_len == len &&
				memcmp(ie->body, body, len) == 0)
			{
				evhttp_add_header(evhttp_request_get_output_headers(req),
								  "Idempotent-Replayed", "true");
				api_reply(req, 200, ie->response);
			}
			else
			{
				sb_printf(&b, "Keys for idempotent requests can only be used with the same "
						  "parameters they were first used with. Try using a key other than "
						  "'%s' if you meant to execute a different request.", key);
				api_stripe_error(req, 400, "idempotency_error", NULL, NULL, b.data);
			}
			goto done;
		}
	}
	if (len > 0 && (ct == NULL || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0))
	{
		stripe_msg(req, 400, NULL, NULL,
				   "Invalid request: Stripe's v1 API takes application/x-www-form-urlencoded "
				   "parameters (Content-Type was %s)", ct ? ct : "missing");
		goto done;
	}
	if (params_parse(body, len, &ps) != 0)
	{
		stripe_msg(req, 400, NULL, NULL, "Invalid request body: %s", "not a form encoding");
		goto done;
	}
	if (check_names(req, &ps, refund_params, "amount charge metadata payment_intent reason", 0) != 0 ||
		render_metadata_params(req, &ps, &meta) != 0)
		goto done;
	pi_s = params_get(&ps, "payment_intent");
	ch_s = params_get(&ps, "charge");
	amount_s = params_get(&ps, "amount");
	reason = params_get(&ps, "reason");
	if (pi_s == NULL && ch_s == NULL)
	{
		api_stripe_error(req, 400, "invalid_request_error", "parameter_missing", "payment_intent",
						 "One of the following params should be provided for this request: "
						 "payment_intent or charge.");
		goto done;
	}
	if (pi_s)
		k = model_find_object(m, OT_PI, pi_s);
	else
	{
		long		c = model_find_object(m, OT_CHARGE, ch_s);

		k = c >= 0 ? m->objs[c].parent : -1;
	}
	if (k >= 0 && m->objs[k].account != account)
		k = -1;
	if (k < 0)
	{
		sb_printf(&b, "No such %s: '%s'", pi_s ? "payment_intent" : "charge", pi_s ? pi_s : ch_s);
		api_stripe_error(req, 404, "invalid_request_error", "resource_missing",
						 pi_s ? "payment_intent" : "charge", b.data);
		goto done;
	}
	if (reason && !one_of(reason, "duplicate fraudulent requested_by_customer"))
	{
		stripe_msg(req, 400, NULL, "reason",
				   "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer (got %s)",
				   reason);
		goto done;
	}
	if (amount_s && parse_int64(amount_s, 1, INT64_MAX / 2, &amount) != 0)
	{
		stripe_msg(req, 400, "parameter_invalid_integer", "amount",
				   "Invalid integer: %s", amount_s);
		goto done;
	}
	if (strcmp(obj_status_name(&m->objs[k]), "succeeded") != 0)
	{
		sb_printf(&b, "This PaymentIntent (%s) does not have a successful charge to refund.",
				  m->objs[k].id);
		api_stripe_error(req, 400, "invalid_request_error", NULL, "payment_intent", b.data);
		goto done;
	}
	if (m->objs[k].amount_refunded >= m->objs[k].amount)
	{
		sb_printf(&b, "Charge for PaymentIntent %s has already been refunded.", m->objs[k].id);
		api_stripe_error(req, 400, "invalid_request_error", "charge_already_refunded", NULL, b.data);
		goto done;
	}
	if (!amount_s)
		amount = m->objs[k].amount - m->objs[k].amount_refunded;
	else if (amount > m->objs[k].amount - m->objs[k].amount_refunded)
	{
		sb_printf(&b, "Refund amount (%lld) is greater than unrefunded amount on charge (%lld)",
				  (long long) amount, (long long) (m->objs[k].amount - m->objs[k].amount_refunded));
		api_stripe_error(req, 400, "invalid_request_error", "amount_too_large", "amount", b.data);
		goto done;
	}
	re = model_effect_refund(m, k, amount, meta.data ? meta.data : "", reason);
	render_object(m, &b, &m->objs[re]);
	if (key && *key)
	{
		long		e = idmap_get(&api->idem_index, key);
		idem_entry *ie;

		if (e < 0)
		{
			api->idem = xrealloc(api->idem, (size_t) (api->nidem + 1) * sizeof(idem_entry));
			e = api->nidem++;
			idmap_put(&api->idem_index, key, e);
		}
		else
		{
			/* an expired key: forgotten, now reused */
			free(api->idem[e].key);
			free(api->idem[e].path);
			free(api->idem[e].body);
			free(api->idem[e].response);
		}
		ie = &api->idem[e];
		ie->key = xstrdup(key);
		ie->path = xstrdup(path);
		ie->body = body;
		ie->body_len = len;
		ie->response = xstrdup(b.data);
		ie->created = now;
		body = NULL;			/* kept by the store */
	}
	if (api_draw_drop(api, path))
		api_drop_connection(req);
	else
		api_reply(req, 200, b.data);

done:
	params_free(&ps);
	free(body);
	sb_free(&b);
	sb_free(&meta);
}
