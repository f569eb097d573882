-- Preset routes and machines: the providers' real lifecycles (stripe-node's
-- status unions and event names, razorpay-node's entity statuses).
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('pr_stripe', 'stripe', 'whsec_pr', api_base => 'http://127.0.0.1:9') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('pr_rzp', 'razorpay', 'rzp-pr') IS NOT NULL AS created;
CREATE FUNCTION pr_classify(kind text, event_type text, payload text)
RETURNS TABLE (strategy text, object_type text, object_id text, status_value text) LANGUAGE sql AS $$
	SELECT c.strategy, c.object_type, c.object_id, c.status_value
	  FROM webhook_inbox._classify(NULL, kind, event_type, payload::jsonb) c
$$;

-- every Stripe route, and what it is for
SELECT event_type, class, strategy, object_type, occurrence_kind, priority
  FROM webhook_inbox.routes WHERE source_kind = 'stripe' ORDER BY event_type;

-- Stripe: each state event fetches the present; the object id is where the event type keeps it
SELECT * FROM pr_classify('stripe', 'payment_intent.payment_failed', '{"data":{"object":{"id":"pi_1","status":"requires_payment_method"}}}');
SELECT * FROM pr_classify('stripe', 'customer.subscription.deleted', '{"data":{"object":{"id":"sub_1","status":"canceled"}}}');
SELECT * FROM pr_classify('stripe', 'customer.deleted', '{"data":{"object":{"id":"cus_1","object":"customer","deleted":true}}}');
SELECT * FROM pr_classify('stripe', 'customer.source.created', '{"data":{"object":{"id":"card_1","customer":"cus_1"}}}');
SELECT * FROM pr_classify('stripe', 'customer.tax_id.updated', '{"data":{"object":{"id":"txi_1","customer":"cus_1"}}}');
SELECT * FROM pr_classify('stripe', 'invoice.payment_failed', '{"data":{"object":{"id":"in_1","status":"open"}}}');
SELECT * FROM pr_classify('stripe', 'invoice.upcoming', '{"data":{"object":{"object":"invoice"}}}');
SELECT * FROM pr_classify('stripe', 'charge.succeeded', '{"data":{"object":{"id":"ch_1","status":"succeeded"}}}');
SELECT * FROM pr_classify('stripe', 'charge.refund.updated', '{"data":{"object":{"id":"re_1","status":"succeeded"}}}');
SELECT * FROM pr_classify('stripe', 'refund.failed', '{"data":{"object":{"id":"re_1","status":"failed"}}}');
SELECT * FROM pr_classify('stripe', 'charge.dispute.closed', '{"data":{"object":{"id":"dp_1","status":"won"}}}');
SELECT * FROM pr_classify('stripe', 'checkout.session.expired', '{"data":{"object":{"id":"cs_1","status":"expired"}}}');

-- a PaymentIntent's lifecycle has cycles: every status the present shows is saved, in any order
SELECT webhook_inbox.upsert_object('pr_stripe', 'payment_intent', 'pi_cycle', NULL, s, jsonb_build_object('id', 'pi_cycle', 'status', s))
  FROM unnest(ARRAY['requires_payment_method', 'requires_confirmation', 'requires_action', 'requires_payment_method',
					'processing', 'requires_capture', 'succeeded']) WITH ORDINALITY AS u(s, k) ORDER BY k;
SELECT string_agg(coalesce(from_status, '-') || '>' || to_status, ' ' ORDER BY id) AS walk
  FROM webhook_inbox.transitions WHERE object_id = 'pi_cycle';

-- a fetch that answers a canceled subscription saves it as canceled; a deleted customer is a tombstone
SELECT webhook_inbox.intake('pr_stripe', '{}', convert_to(
	'{"id":"evt_pr_1","type":"customer.subscription.deleted","created":1700000000,"data":{"object":{"id":"sub_pr","status":"canceled"}}}', 'UTF8'));
SELECT webhook_inbox.intake('pr_stripe', '{}', convert_to(
	'{"id":"evt_pr_2","type":"customer.deleted","created":1700000000,"data":{"object":{"id":"cus_pr","object":"customer","deleted":true}}}', 'UTF8'));
CREATE TEMP TABLE pr_claims AS SELECT * FROM webhook_inbox.claim('pr', 10, '30 seconds', '0')
 WHERE object_id IN ('sub_pr', 'cus_pr');
SELECT object_type, object_id, strategy FROM pr_claims ORDER BY object_id;
SELECT webhook_inbox._save_fetched(claim_token, 200, '{"id":"sub_pr","object":"subscription","status":"canceled"}',
	'$', '$.status', NULL) FROM pr_claims WHERE object_id = 'sub_pr';
SELECT webhook_inbox._save_fetched(claim_token, 200, '{"id":"cus_pr","object":"customer","deleted":true}',
	'$', NULL, NULL) FROM pr_claims WHERE object_id = 'cus_pr';
SELECT object_type, object_id, status, deleted FROM webhook_inbox.objects
 WHERE object_id IN ('sub_pr', 'cus_pr') ORDER BY object_id;

-- a refund's status is followed and the refund counted once, with amount and currency
SELECT webhook_inbox.intake('pr_stripe', '{}', convert_to(format(
	'{"id":"evt_re_%s","type":"%s","created":1700000000,"data":{"object":{"id":"re_pr","status":"%s","amount":700,"currency":"eur"}}}',
	k, t, s), 'UTF8'))
  FROM (VALUES (1, 'refund.created', 'pending'), (2, 'charge.refund.updated', 'succeeded')) AS v(k, t, s);
CREATE TEMP TABLE pr_refund AS SELECT * FROM webhook_inbox.claim('pr', 10, '30 seconds', '0') WHERE object_id = 're_pr';
SELECT object_type, cardinality(event_ids) AS events, strategy FROM pr_refund;
SELECT outcome, events FROM webhook_inbox._work_round((SELECT array_agg(claim_token) FROM pr_refund)) ORDER BY outcome;
SELECT webhook_inbox._save_fetched(claim_token, 200, '{"id":"re_pr","object":"refund","status":"succeeded","amount":700,"currency":"eur"}',
	'$', '$.status', NULL) FROM pr_refund;
SELECT kind, occurrence_id, amount, currency FROM webhook_inbox.occurrences WHERE occurrence_id = 're_pr';
SELECT object_type, status, deleted FROM webhook_inbox.objects WHERE object_id = 're_pr';

-- Razorpay: payments, refunds and orders walk machines of their real statuses
SELECT machine, string_agg(from_state || '>' || to_state, ' ' ORDER BY from_state, to_state) AS edges
  FROM webhook_inbox.machines WHERE machine LIKE 'razorpay_%' GROUP BY machine ORDER BY machine;
SELECT webhook_inbox.transition_allowed('razorpay_payment', 'authorized', 'refunded') AS uncaptured_refunded,
	   webhook_inbox.transition_allowed('razorpay_payment', 'captured', 'authorized') AS captured_back,
	   webhook_inbox.transition_allowed('razorpay_refund', 'processed', 'pending') AS processed_back,
	   webhook_inbox.transition_allowed('razorpay_order', 'unknown', 'paid') AS order_paid_first;
SELECT * FROM pr_classify('razorpay', 'refund.processed', '{"payload":{"refund":{"entity":{"id":"rfnd_1","status":"processed","amount":100,"currency":"INR"}}}}');
SELECT * FROM pr_classify('razorpay', 'order.paid', '{"payload":{"order":{"entity":{"id":"order_1","status":"paid"}},"payment":{"entity":{"id":"pay_1","status":"captured"}}}}');
SELECT * FROM pr_classify('razorpay', 'payment.downtime.started', '{"payload":{"payment.downtime":{"entity":{"id":"down_1"}}}}');
SELECT webhook_inbox.intake('pr_rzp', ARRAY['x-razorpay-event-id', 'rzp_pr_' || k], convert_to(format(
	'{"event":"%s","created_at":%s,"payload":{"refund":{"entity":{"id":"rfnd_pr","status":"%s","amount":100,"currency":"INR"}}}}',
	e, 1700000000 + k, s), 'UTF8'))
  FROM (VALUES (2, 'refund.processed', 'processed'), (1, 'refund.created', 'pending')) AS v(k, e, s);
SELECT outcome, events FROM webhook_inbox._work_round(
	(SELECT array_agg(claim_token) FROM webhook_inbox.claim('pr', 10, '30 seconds', '0') WHERE object_id = 'rfnd_pr'))
 ORDER BY outcome;
SELECT object_type, status FROM webhook_inbox.objects WHERE object_id = 'rfnd_pr';
SELECT kind, amount, currency FROM webhook_inbox.occurrences WHERE occurrence_id = 'rfnd_pr';
