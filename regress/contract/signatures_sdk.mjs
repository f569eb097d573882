// Verifies webhook deliveries, as a sink recorded them, with the providers'
// official SDKs: the signature headers webhook-sim writes must be what each
// provider's own verification accepts.
//
//   node signatures_sdk.mjs REQUESTS.jsonl SECRETS.json
//
// REQUESTS.jsonl: one request a line, {"path", "headers" (lowercased),
// "body_b64"}, the kind taken from the path's source name (/hooks/k_KIND).
// SECRETS.json: {"KIND": "secret", ...}.  Prints one JSON line per request:
// {"name", "ok", "detail"}; a kind without an SDK here is reported as such.
import { readFileSync } from 'node:fs';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { verify as githubVerify } from '@octokit/webhooks-methods';
import Razorpay from 'razorpay';
import { Paddle } from '@paddle/paddle-node-sdk';
import '@shopify/shopify-api/adapters/node';
import { shopifyApi, ApiVersion } from '@shopify/shopify-api';
import { verifySlackRequest } from '@slack/bolt';

const [requestsFile, secretsFile] = process.argv.slice(2);
const secrets = JSON.parse(readFileSync(secretsFile, 'utf8'));
const stripe = new Stripe('sk_test_signatures');
const paddle = new Paddle('pdl_sdbx_apikey_signatures');
// the Shopify app the deliveries are for: its API secret key signs them
const shopify = secrets.shopify && shopifyApi({
	apiKey: 'signatures', apiSecretKey: secrets.shopify, scopes: [], hostName: 'localhost',
	apiVersion: ApiVersion.October25, isEmbeddedApp: false, logger: { level: 0 },
});

// Shopify's validate() also requires the headers every webhook carries
// (topic, shop domain, API version, webhook id), and names those missing
async function shopifyValid(body, headers) {
	const r = await shopify.webhooks.validate({ rawBody: body, rawRequest: { method: 'POST', url: '/', headers },
		rawResponse: {} });
	if (r.valid) return true;
	throw new Error(`${r.reason}${r.missingHeaders ? ': ' + r.missingHeaders.join(', ') : ''}`);
}

// each returns true when the SDK accepts the delivery, or throws its error
const verifiers = {
	stripe: (body, h, s) => Boolean(stripe.webhooks.constructEvent(body, h['stripe-signature'], s)),
	standard: (body, h, s) => Boolean(new Webhook(s).verify(body, {
		'webhook-id': h['webhook-id'], 'webhook-timestamp': h['webhook-timestamp'],
		'webhook-signature': h['webhook-signature'],
	})),
	github: (body, h, s) => githubVerify(s, body, h['x-hub-signature-256']),
	razorpay: (body, h, s) => Razorpay.validateWebhookSignature(body, h['x-razorpay-signature'], s),
	paddle: (body, h, s) => paddle.webhooks.isSignatureValid(body, s, h['paddle-signature']),
	shopify: (body, h) => shopifyValid(body, h),
	slack: (body, h, s) => {
		verifySlackRequest({ signingSecret: s, body, headers: {
			'x-slack-signature': h['x-slack-signature'],
			'x-slack-request-timestamp': Number(h['x-slack-request-timestamp']),
		} });
		return true;
	},
};

for (const line of readFileSync(requestsFile, 'utf8').split('\n')) {
	if (!line.trim()) continue;
	const req = JSON.parse(line);
	const kind = (req.path.match(/\/hooks\/k_(\w+)/) || [])[1];
	const body = Buffer.from(req.body_b64, 'base64').toString('utf8');
	const name = `${kind}: ${req.path}`;
	if (!verifiers[kind]) {
		console.log(JSON.stringify({ name, kind, ok: null, detail: 'no official SDK verifier here' }));
		continue;
	}
	try {
		const ok = await verifiers[kind](body, req.headers, secrets[kind]);
		console.log(JSON.stringify({ name, kind, ok: ok === true, detail: ok === true ? '' : `SDK said ${ok}` }));
	} catch (e) {
		console.log(JSON.stringify({ name, kind, ok: false, detail: String(e && e.message || e) }));
	}
}
