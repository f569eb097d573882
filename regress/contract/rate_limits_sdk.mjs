// regress/contract/rate_limits_sdk.mjs
//	webhook-sim serve --rate-limit against the providers' own clients: the
//	refusals past Stripe's and GitHub's documented limits must be what
//	stripe-node and @octokit/request make of the real ones, with the
//	headers the providers' docs name.
//
//	node rate_limits_sdk.mjs SIM_URL STRIPE_KEY GITHUB_REPO
//	prints one JSON line per check: {name, ok, detail}.
import Stripe from 'stripe';
import { request } from '@octokit/request';
import { githubSchema } from './github_sdk.mjs';

const [, , base, key, repo] = process.argv;
const u = new URL(base);
const report = (name, ok, detail) => console.log(JSON.stringify({ name, ok: !!ok, detail }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// no retry of its own, so that every refusal reaches the caller
const stripe = new Stripe(key, { host: u.hostname, port: u.port, protocol: 'http', maxNetworkRetries: 0 });

async function burst(calls)
{
	const r = await Promise.allSettled(calls.map((f) => f()));
	return { ok: r.filter((x) => x.status === 'fulfilled').length, errors: r.filter((x) => x.status === 'rejected').map((x) => x.reason) };
}

// Stripe, live key: 100/s in all, 25/s per endpoint (https://docs.stripe.com/rate-limits)
{
	let b = await burst(Array.from({ length: 40 }, () => () => stripe.subscriptions.list({ limit: 1 })));
	report('stripe: 40 at once of one endpoint: 25 answered', b.ok === 25, `${b.ok} answered`);
	const e = b.errors[0];
	report('stripe-node reads the refusal as StripeRateLimitError', e instanceof Stripe.errors.StripeRateLimitError
		&& e.type === 'StripeRateLimitError' && e.statusCode === 429, e && `${e.type} ${e.statusCode}`);
	report('its raw error: invalid_request_error, code rate_limit', e && e.rawType === 'invalid_request_error' && e.code === 'rate_limit',
		e && `${e.rawType} ${e.code}`);
	report('Stripe-Rate-Limited-Reason: endpoint-rate', e && e.headers['stripe-rate-limited-reason'] === 'endpoint-rate',
		e && JSON.stringify(e.headers));
	report('every refusal is one', b.errors.every((x) => x instanceof Stripe.errors.StripeRateLimitError), `${b.errors.length} refused`);

	await sleep(1100);
	// four endpoints, 25 each: the endpoints' limits hold, and the global one of 100
	const lists = [() => stripe.subscriptions.list({ limit: 1 }), () => stripe.invoices.list({ limit: 1 }),
		() => stripe.paymentIntents.list({ limit: 1 }), () => stripe.events.list({ limit: 1 })];
	b = await burst(Array.from({ length: 100 }, (_, i) => lists[i % 4]));
	report('stripe: 100 at once over four endpoints: all answered', b.ok === 100, `${b.ok} answered`);
	b = await burst(Array.from({ length: 8 }, (_, i) => () => stripe.customers.list({ limit: 1 })));
	const g = b.errors[0];
	report('the 101st to 108th in that second: global-rate', b.ok === 0 && b.errors.length === 8
		&& g instanceof Stripe.errors.StripeRateLimitError && g.headers['stripe-rate-limited-reason'] === 'global-rate',
		`${b.ok} answered; ${g && g.headers['stripe-rate-limited-reason']}`);

	await sleep(1100);
	// paced at the limit, nothing is refused
	let refused = 0;
	for (let i = 0; i < 50; i++)
	{
		const t = Date.now();
		try { await stripe.subscriptions.list({ limit: 1 }); } catch (x) { refused++; }
		await sleep(Math.max(0, 41 - (Date.now() - t)));
	}
	report('stripe: 50 paced at 24/s on one endpoint: none refused', refused === 0, `${refused} refused`);
}

// GitHub: the secondary limit, 900 points a minute per REST endpoint, a GET 1 point
{
	const gh = request.defaults({ baseUrl: base, headers: { authorization: `token ${key}` } });
	const [owner, name] = repo.split('/');
	let answered = 0;
	const errors = [];
	for (let round = 0; round < 19; round++)
	{
		const r = await Promise.allSettled(Array.from({ length: 50 }, () =>
			gh('GET /repos/{owner}/{repo}/issues', { owner, repo: name, per_page: 1 })));
		answered += r.filter((x) => x.status === 'fulfilled').length;
		errors.push(...r.filter((x) => x.status === 'rejected').map((x) => x.reason));
	}
	report('github: 950 GETs of one endpoint in a minute: 900 answered', answered === 900, `${answered} answered`);
	const e = errors[0];
	report('@octokit/request: a RequestError with status 403', e && e.name === 'HttpError' && e.status === 403,
		e && `${e.name} ${e.status}`);
	report('retry-after in seconds', e && /^[1-9][0-9]*$/.test(e.response.headers['retry-after'] ?? ''),
		e && JSON.stringify(e.response.headers));
	const schema = githubSchema('basic-error');
	const fields = e ? Object.keys(e.response.data) : [];
	report('its body is a basic-error of GitHub\'s OpenAPI, saying secondary rate limit',
		e && fields.every((f) => f in schema.properties) && /secondary rate limit/.test(e.response.data.message),
		JSON.stringify(e && e.response.data));
	const other = await gh('GET /repos/{owner}/{repo}/pulls', { owner, repo: name, per_page: 1 }).then(() => true, () => false);
	report('another endpoint is counted apart', other, '');
}
