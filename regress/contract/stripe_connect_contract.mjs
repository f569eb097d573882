// regress/contract/stripe_connect_contract.mjs URL
//	Drives a webhook-sim serving Stripe Connect (--connect-accounts) with the
//	official stripe-node client and its per-request stripeAccount and
//	stripeContext options, and checks that the SDK accepts every answer:
//	accounts.list auto-paginated (AccountListParams), each account's lists
//	and events seen only under its own Stripe-Account, a retrieve under the
//	right account, and under the platform or another account the error the
//	SDK types for a missing object (StripeInvalidRequestError,
//	resource_missing, "No such subscription: '…'", HTTP 404).  The SDK's own
//	rule is checked too: it refuses stripeAccount with stripeContext.
//	Prints one JSON line per check: {"ok":bool,"name":…,"detail":…}.
import Stripe from 'stripe';

const url = new URL(process.argv[2]);
const stripe = new Stripe('sk_test_connect_contract', {
	host: url.hostname, port: Number(url.port), protocol: 'http',
	maxNetworkRetries: 0, telemetry: false,
});

function check(ok, name, detail)
{
	console.log(JSON.stringify({ ok: !!ok, name, detail: detail === undefined ? null : String(detail) }));
}

async function all(list)
{
	const out = [];
	for await (const x of list)
		out.push(x);
	return out;
}

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

const truth = await (await fetch(new URL('/_sim/truth', url))).json();
const tenants = [ ...new Set(truth.objects.map((o) => o.tenant)) ].sort();

// 1. the connected accounts, two to a page
const accounts = await all(stripe.accounts.list({ limit: 2 }));
check(accounts.length === tenants.length && accounts.every((a) => a.object === 'account' && tenants.includes(a.id)),
	'accounts.list auto-paginates the connected accounts', accounts.map((a) => a.id).join(','));
const one = await stripe.accounts.retrieve(accounts[0].id);
check(one.id === accounts[0].id, 'accounts.retrieve(id)', one.id);
check(truth.objects.every((o) => o.tenant !== ''), 'the platform owns no object');

// 2. each account's subscriptions, under its Stripe-Account only
for (const acct of tenants)
{
	const mine = truth.objects.filter((o) => o.tenant === acct && o.type === 'subscription').map((o) => o.id).sort();
	const listed = (await all(stripe.subscriptions.list({ status: 'all', limit: 5 }, { stripeAccount: acct })))
		.map((s) => s.id).sort();
	check(JSON.stringify(listed) === JSON.stringify(mine), `subscriptions.list under ${acct}`,
		`${listed.length} listed, ${mine.length} in the truth`);
	const events = await all(stripe.events.list({ limit: 50 }, { stripeAccount: acct }));
	check(events.length > 0 && events.every((e) => e.account === acct), `events.list under ${acct}: each names it`,
		`${events.length} events`);
}
const platformSubs = await all(stripe.subscriptions.list({ status: 'all', limit: 100 }));
check(platformSubs.length === 0, 'the platform lists no subscription', platformSubs.length);
const platformEvents = await all(stripe.events.list({ limit: 100 }));
check(platformEvents.length === 0, 'the platform lists no event', platformEvents.length);

// 3. one subscription: found under its account, by id and by context; missing elsewhere
const sub = truth.objects.find((o) => o.type === 'subscription');
const other = tenants.find((a) => a !== sub.tenant);
const got = await stripe.subscriptions.retrieve(sub.id, {}, { stripeAccount: sub.tenant });
check(got.id === sub.id && got.status === sub.status, 'subscriptions.retrieve under its Stripe-Account', got.status);
const byContext = await stripe.subscriptions.retrieve(sub.id, {}, { stripeContext: sub.tenant });
check(byContext.id === sub.id, 'subscriptions.retrieve under its Stripe-Context', byContext.id);
for (const [ who, opts ] of [ [ 'the platform', {} ], [ 'another account', { stripeAccount: other } ] ])
{
	const e = await failure(() => stripe.subscriptions.retrieve(sub.id, {}, opts));
	check(e instanceof Stripe.errors.StripeInvalidRequestError && e.statusCode === 404 &&
		e.code === 'resource_missing' && e.message === `No such subscription: '${sub.id}'`,
		`under ${who} the subscription is missing, as stripe-node types it`,
		e && `${e.type} ${e.statusCode} ${e.code} ${e.message}`);
}
const ev = (await stripe.events.list({ limit: 1 }, { stripeAccount: sub.tenant })).data[0];
const evMissing = await failure(() => stripe.events.retrieve(ev.id));
check(evMissing && evMissing.statusCode === 404 && evMissing.code === 'resource_missing',
	'an account\'s event retrieved as the platform is missing', evMissing && evMissing.message);
const evFound = await stripe.events.retrieve(ev.id, {}, { stripeAccount: sub.tenant });
check(evFound.id === ev.id && evFound.account === sub.tenant, 'the event retrieved under its account', evFound.id);

// 4. an unknown account, and the SDK's refusal of both headers
const unknown = await failure(() => stripe.subscriptions.list({}, { stripeAccount: 'acct_nosuchaccount1' }));
check(unknown instanceof Stripe.errors.StripeError && unknown.statusCode === 403,
	'an account the platform does not have is refused', unknown && `${unknown.statusCode} ${unknown.message}`);
const both = await failure(() => stripe.subscriptions.list({}, { stripeAccount: sub.tenant, stripeContext: sub.tenant }));
check(both && /both stripeAccount and stripeContext/.test(both.message),
	'stripe-node refuses stripeAccount with stripeContext', both && both.message);
