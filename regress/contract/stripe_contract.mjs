// regress/contract/stripe_contract.mjs URL
//	Drives a running webhook-sim with the official stripe-node client and
//	checks that the SDK accepts every answer: lists with auto-pagination
//	(starting_after, has_more), ending_before, retrieves, the events API with
//	created[gte] and types[], refund creation with an idempotency key and
//	metadata, and Stripe's errors as the SDK surfaces them.  Statuses and
//	event types are checked against the unions the SDK's .d.ts files declare.
//	Prints one JSON line per check: {"ok":bool,"name":…,"detail":…}.
import Stripe from 'stripe';
import { stringUnion } from './stripe_sdk.mjs';

const url = new URL(process.argv[2]);
const stripe = new Stripe('sk_test_contract', {
	host: url.hostname, port: Number(url.port), protocol: 'http',
	maxNetworkRetries: 0, telemetry: false,
});

function check(ok, name, detail)
{
	console.log(JSON.stringify({ ok: !!ok, name, detail: detail === undefined ? null : String(detail) }));
}

async function truth()
{
	const res = await fetch(new URL('/_sim/truth', url));
	return res.json();
}

async function all(list)
{
	const out = [];
	for await (const x of list)
		out.push(x);
	return out;
}

// the SDK's error for a call that must fail
async function failure(fn)
{
	try
	{
		await fn();
		return null;
	}
	catch (e)
	{
		return e;
	}
}

const unions = {
	subscription: stringUnion('Subscriptions.d.ts', 'Subscription', 'Status'),
	payment_intent: stringUnion('PaymentIntents.d.ts', 'PaymentIntent', 'Status'),
	invoice: stringUnion('Invoices.d.ts', 'Invoice', 'Status'),
	dispute: stringUnion('Disputes.d.ts', 'Dispute', 'Status'),
	charge: stringUnion('Charges.d.ts', 'Charge', 'Status'),
	'checkout.session': stringUnion('Checkout/Sessions.d.ts', 'Session', 'Status'),
};
const eventTypes = new Set(stringUnion('Events.d.ts', 'Event', 'Type'));
// Refund.status is typed as a string; its values are those of Stripe's docs
unions.refund = [ 'pending', 'requires_action', 'succeeded', 'failed', 'canceled' ];

const t = await truth();
const byType = {};
for (const o of t.objects)
	(byType[o.type] = byType[o.type] || []).push(o);

// 1. every list, auto-paginated 7 at a time, equals the truth (default filters apart)
const lists = [
	[ 'subscription', () => stripe.subscriptions.list({ status: 'all', limit: 7 }) ],
	[ 'payment_intent', () => stripe.paymentIntents.list({ limit: 7 }) ],
	[ 'invoice', () => stripe.invoices.list({ limit: 7 }) ],
	[ 'refund', () => stripe.refunds.list({ limit: 7 }) ],
	[ 'dispute', () => stripe.disputes.list({ limit: 7 }) ],
	[ 'charge', () => stripe.charges.list({ limit: 7 }) ],
	[ 'checkout.session', () => stripe.checkout.sessions.list({ limit: 7 }) ],
	[ 'customer', () => stripe.customers.list({ limit: 7 }) ],
];
for (const [ type, list ] of lists)
{
	const want = (byType[type] || []).filter((o) => !o.deleted);
	const got = await all(list());
	const ids = new Set(got.map((o) => o.id));
	check(want.length > 0, `${type}: the scenario has some`, want.length);
	check(got.length === want.length && want.every((o) => ids.has(o.id)),
		`${type}: the SDK's auto-pagination lists every one exactly once`, `${got.length} of ${want.length}`);
	check(got.every((o) => o.object === type), `${type}: object is "${type}"`);
	const bad = got.filter((o) => unions[type] && !unions[type].includes(o.status));
	check(bad.length === 0, `${type}: every status is in the SDK's union`, bad.map((o) => o.status).join(','));
	const c = got.map((o) => o.created);
	check(c.every((x, i) => i === 0 || x <= c[i - 1]), `${type}: newest first`);
}

// 2. the default subscription list omits canceled ones
const dflt = await all(stripe.subscriptions.list({ limit: 100 }));
const canceled = (byType.subscription || []).filter((o) => o.status === 'canceled');
check(canceled.length > 0 && dflt.every((s) => s.status !== 'canceled')
	&& dflt.length === byType.subscription.length - canceled.length,
	'subscriptions.list() without status omits canceled ones', `${dflt.length} listed, ${canceled.length} canceled`);

// 3. retrieve: a canceled subscription, a deleted customer, a missing object
const sub = await stripe.subscriptions.retrieve(canceled[0].id);
check(sub.id === canceled[0].id && sub.status === 'canceled', 'a canceled subscription is retrieved with status canceled');
const gone = (byType.customer || []).find((o) => o.deleted);
const dc = gone && await stripe.customers.retrieve(gone.id);
check(dc && dc.deleted === true && dc.object === 'customer', 'a deleted customer is retrieved as deleted: true');
for (const type of [ 'payment_intent', 'invoice', 'refund', 'dispute', 'charge', 'checkout.session' ])
{
	const o = byType[type][0];
	const api = { payment_intent: stripe.paymentIntents, invoice: stripe.invoices, refund: stripe.refunds,
		dispute: stripe.disputes, charge: stripe.charges, 'checkout.session': stripe.checkout.sessions }[type];
	const got = await api.retrieve(o.id);
	check(got.id === o.id && got.status === o.status, `${type}: retrieve equals the truth`);
}
let e = await failure(() => stripe.subscriptions.retrieve('sub_doesnotexist'));
check(e instanceof Stripe.errors.StripeInvalidRequestError && e.statusCode === 404 && e.code === 'resource_missing',
	'a missing object: StripeInvalidRequestError 404 resource_missing', e && `${e.type} ${e.statusCode} ${e.code}`);

// 4. unknown parameters: Stripe's error shape, as the SDK surfaces it
e = await failure(() => stripe.subscriptions.list({ updated_since: 0 }));
check(e instanceof Stripe.errors.StripeInvalidRequestError && e.code === 'parameter_unknown'
	&& e.param === 'updated_since' && e.statusCode === 400,
	'an unknown parameter: StripeInvalidRequestError parameter_unknown with param', e && `${e.type} ${e.code} ${e.param}`);
e = await failure(() => stripe.paymentIntents.list({ status: 'succeeded' }));
check(e && e.code === 'parameter_unknown', 'payment_intents.list has no status parameter', e && e.code);

// 5. ending_before pages towards newer objects
const page = await stripe.subscriptions.list({ status: 'all', limit: 5 });
const older = await stripe.subscriptions.list({ status: 'all', limit: 5, starting_after: page.data[4].id });
const back = await stripe.subscriptions.list({ status: 'all', limit: 5, ending_before: older.data[0].id });
check(back.data.map((s) => s.id).join() === page.data.map((s) => s.id).join() && page.has_more && page.url === '/v1/subscriptions',
	'starting_after then ending_before comes back to the same page');

// 6. events: created[gte], types[], data.object snapshots, type names of Event.Type
const events = await all(stripe.events.list({ limit: 100 }));
check(events.length > 0 && events.every((ev) => eventTypes.has(ev.type)), 'every event type is in the SDK\'s Event.Type',
	events.filter((ev) => !eventTypes.has(ev.type)).map((ev) => ev.type).join(','));
check(events.every((ev) => ev.object === 'event' && ev.data && ev.data.object && ev.data.object.id),
	'every event carries data.object');
const mid = events[Math.floor(events.length / 2)].created;
const recent = await all(stripe.events.list({ created: { gte: mid }, limit: 100 }));
check(recent.length === events.filter((ev) => ev.created >= mid).length && recent.length > 0,
	'events.list({created: {gte}}) filters by created', `${recent.length}`);
const typed = await all(stripe.events.list({ types: [ 'invoice.paid', 'refund.created' ], limit: 100 }));
check(typed.length > 0 && typed.every((ev) => ev.type === 'invoice.paid' || ev.type === 'refund.created'),
	'events.list({types: [...]}) filters by type', typed.length);
const one = await stripe.events.retrieve(events[0].id);
check(one.id === events[0].id, 'events.retrieve');

// 7. a refund with an idempotency key, found again by metadata
const refunded = new Set((byType.refund || []).map((r) => r.id));
const pis = await all(stripe.paymentIntents.list({ limit: 100 }));
const pi = pis.find((p) => p.status === 'succeeded' && p.amount > 200 && p.amount_received === p.amount);
const refundsOf = async (p) => all(stripe.refunds.list({ payment_intent: p.id, limit: 100 }));
let left = pi.amount - (await refundsOf(pi)).filter((r) => r.status !== 'failed' && r.status !== 'canceled')
	.reduce((s, r) => s + r.amount, 0);
let pick = pi;
for (const p of pis.filter((x) => x.status === 'succeeded'))
{
	const l = p.amount - (await refundsOf(p)).filter((r) => r.status !== 'failed' && r.status !== 'canceled')
		.reduce((s, r) => s + r.amount, 0);
	if (l > 2)
	{
		pick = p;
		left = l;
		break;
	}
}
const opts = { idempotencyKey: 'contract-key-1' };
const r1 = await stripe.refunds.create({ payment_intent: pick.id, amount: 1, metadata: { effect_key: 'contract-1' } }, opts);
const r2 = await stripe.refunds.create({ payment_intent: pick.id, amount: 1, metadata: { effect_key: 'contract-1' } }, opts);
check(r1.object === 'refund' && r1.id.startsWith('re_') && !refunded.has(r1.id) && r1.metadata.effect_key === 'contract-1',
	'refunds.create with metadata and an idempotency key', `${r1.id} (left ${left})`);
check(r2.id === r1.id && r2.lastResponse.headers['idempotent-replayed'] === 'true',
	'the same key and parameters replay the same refund');
e = await failure(() => stripe.refunds.create({ payment_intent: pick.id, amount: 2 }, opts));
check(e instanceof Stripe.errors.StripeIdempotencyError, 'the same key with other parameters: StripeIdempotencyError',
	e && e.type);
const found = (await refundsOf(pick)).filter((r) => r.metadata && r.metadata.effect_key === 'contract-1');
check(found.length === 1 && found[0].id === r1.id, 'refunds.list({payment_intent}) finds the refund by its metadata');
