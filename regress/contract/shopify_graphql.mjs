// shopify_graphql.mjs HEADER [SIM_URL]
//
// The Shopify GraphQL contract, against Shopify's published Admin API schema
// (@shopify/dev-mcp's data/admin_schema_2025-01.json.gz, an introspection
// result) with the graphql package's buildClientSchema() and validate():
//
//  - every document of HEADER (extension/adapters/shopify_graphql.h, the one
//    place the adapter's queries are written) validates;
//  - the same document with one field the schema lacks does not (the check
//    can fail);
//  - every field webhook_inbox.shopify_rest_shape() reads exists with the
//    type it expects, and the enums it lower-cases have the REST values;
//  - with SIM_URL: every type, field, list-ness and argument webhook-sim
//    answers (GET /_sim/shopify/schema) is Shopify's, so a query the
//    simulator answers is one Shopify's schema validates; each order document
//    of HEADER is answered without errors, and the bad one with Shopify's
//    undefinedField error.
//
// One JSON line per check: {"name", "ok", "detail"}.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { createRequire } from 'node:module';
import { buildClientSchema, parse, validate, getNamedType, isListType, isNonNullType } from 'graphql';

const require = createRequire(import.meta.url);
const [headerPath, simUrl] = process.argv.slice(2);
const schemaFile = require.resolve('@shopify/dev-mcp/package.json').replace(/package\.json$/, 'data/admin_schema_2025-01.json.gz');
const intro = JSON.parse(gunzipSync(readFileSync(schemaFile)).toString('utf8'));
const schema = buildClientSchema(intro.data ?? intro);

function report(name, ok, detail) {
	console.log(JSON.stringify({ name, ok: !!ok, detail: detail ?? null }));
}

// The #defines of the header: adjacent string literals and earlier macros.
function readDefines(text) {
	const joined = text.replace(/\\\n/g, ' ');
	const defs = new Map();
	for (const line of joined.split('\n')) {
		const m = line.match(/^#define\s+(SHOPIFY_GQL_\w+)\s+(.*)$/);
		if (!m) continue;
		let rest = m[2].trim();
		let value = '';
		let literal = false;
		while (rest.length) {
			let t;
			if ((t = rest.match(/^"((?:[^"\\]|\\.)*)"/))) {
				value += JSON.parse(`"${t[1]}"`);
				literal = true;
			} else if ((t = rest.match(/^(SHOPIFY_GQL_\w+)/))) {
				if (!defs.has(t[1])) throw new Error(`${m[1]} names ${t[1]} before it is defined`);
				value += defs.get(t[1]);
				literal = true;
			} else if ((t = rest.match(/^\/\*.*?\*\//)) || (t = rest.match(/^\s+/))) {
				// a comment or space between the pieces
			} else if ((t = rest.match(/^\d+/)) && !literal) {
				value = t[0];
			} else {
				throw new Error(`${m[1]}: cannot read ${rest}`);
			}
			rest = rest.slice(t[0].length);
		}
		defs.set(m[1], value);
	}
	return defs;
}

const defs = readDefines(readFileSync(headerPath, 'utf8'));
const docs = [...defs].filter(([k]) => k.endsWith('_QUERY'));
report('the header holds the adapter\'s documents', docs.length >= 6, docs.map(([k]) => k).join(', '));

// the version the adapter asks for and webhook-sim announces: the newest stable one the SDK knows
const { ApiVersion } = await import('@shopify/shopify-api');
const stable = Object.values(ApiVersion).filter((v) => /^\d{4}-\d{2}$/.test(v)).sort();
report(`SHOPIFY_GQL_API_VERSION ${defs.get('SHOPIFY_GQL_API_VERSION')} is @shopify/shopify-api's newest stable ApiVersion`,
	defs.get('SHOPIFY_GQL_API_VERSION') === stable[stable.length - 1], stable.join(', '));

for (const [name, text] of docs) {
	let errors;
	try {
		errors = validate(schema, parse(text)).map((e) => e.message);
	} catch (e) {
		errors = [`parse: ${e.message}`];
	}
	report(`${name} validates against the Admin schema`, errors.length === 0, errors.join('; ') || text);
}

// the check can fail: a field Order does not have
const bad = defs.get('SHOPIFY_GQL_ORDER_QUERY').replace('displayFinancialStatus', 'displayFinancialStatus financialStatusTypo');
const badErrors = validate(schema, parse(bad)).map((e) => e.message);
report('negative: a query naming a field the schema lacks fails validation',
	badErrors.some((m) => m.includes("Cannot query field \"financialStatusTypo\" on type \"Order\"")),
	badErrors.join('; '));

// what the mirror reads (sql/worker.sql shopify_rest_shape), with its type
const reads = [
	['Order', 'id', 'ID!'], ['Order', 'legacyResourceId', 'UnsignedInt64!'], ['Order', 'name', 'String!'],
	['Order', 'createdAt', 'DateTime!'], ['Order', 'updatedAt', 'DateTime!'],
	['Order', 'displayFinancialStatus', 'OrderDisplayFinancialStatus'], ['Order', 'totalPriceSet', 'MoneyBag!'],
	['MoneyBag', 'shopMoney', 'MoneyV2!'], ['MoneyV2', 'amount', 'Decimal!'], ['Order', 'currencyCode', 'CurrencyCode!'],
	['Order', 'cancelledAt', 'DateTime'], ['Order', 'closedAt', 'DateTime'],
	['Product', 'id', 'ID!'], ['Product', 'legacyResourceId', 'UnsignedInt64!'], ['Product', 'title', 'String!'],
	['Product', 'status', 'ProductStatus!'], ['Product', 'createdAt', 'DateTime!'], ['Product', 'updatedAt', 'DateTime!'],
	['Customer', 'id', 'ID!'], ['Customer', 'legacyResourceId', 'UnsignedInt64!'], ['Customer', 'state', 'CustomerState!'],
	['Customer', 'createdAt', 'DateTime!'], ['Customer', 'updatedAt', 'DateTime!'],
	['PageInfo', 'hasNextPage', 'Boolean!'], ['PageInfo', 'endCursor', 'String'],
];
for (const [type, field, want] of reads) {
	const f = schema.getType(type)?.getFields()[field];
	report(`the mirror reads ${type}.${field}: ${want}`, f && String(f.type) === want, f ? String(f.type) : 'missing');
}
// the REST values the mirror keeps are the GraphQL enums lower-cased
const enums = [
	['OrderDisplayFinancialStatus', ['pending', 'authorized', 'partially_paid', 'paid', 'partially_refunded', 'refunded', 'voided']],
	['ProductStatus', ['active', 'archived', 'draft']],
	['CustomerState', ['disabled', 'invited', 'enabled', 'declined']],
];
for (const [type, rest] of enums) {
	const values = schema.getType(type)?.getValues().map((v) => v.name) ?? [];
	const missing = rest.filter((r) => !values.includes(r.toUpperCase()));
	report(`${type} lower-cased holds the REST values ${rest.join(', ')}`, missing.length === 0, `missing: ${missing.join(', ')}`);
}

if (simUrl) {
	const res = await fetch(`${simUrl}/_sim/shopify/schema`);
	const { fields } = await res.json();
	report('webhook-sim serves its GraphQL schema table', fields.length >= 20, `${fields.length} fields`);
	for (const s of fields) {
		const f = schema.getType(s.type)?.getFields()[s.field];
		const problems = [];
		if (!f) {
			problems.push('no such field in the Admin schema');
		} else {
			let t = isNonNullType(f.type) ? f.type.ofType : f.type;
			if (isListType(t) !== s.list) problems.push(`list ${isListType(t)} in the schema`);
			if (getNamedType(f.type).name !== s.returns) problems.push(`returns ${getNamedType(f.type).name} in the schema`);
			for (const a of s.args ? s.args.split(',') : []) {
				const [an, at] = a.split(':');
				const sa = f.args.find((x) => x.name === an);
				if (!sa) problems.push(`no argument ${an}`);
				else if (String(sa.type) !== at) problems.push(`argument ${an} is ${sa.type}, not ${at}`);
			}
		}
		report(`webhook-sim answers ${s.type}.${s.field} as Shopify's schema has it`, problems.length === 0, problems.join('; '));
	}
	async function ask(query, variables) {
		const r = await fetch(`${simUrl}/admin/api/2026-10/graphql.json`, {
			method: 'POST', headers: { 'Content-Type': 'application/json' },
			body: JSON.stringify({ query, variables }),
		});
		return [r.status, await r.json()];
	}
	const [st1, orders] = await ask(defs.get('SHOPIFY_GQL_ORDERS_QUERY'), { first: 5, after: null, query: null });
	const nodes = orders?.data?.orders?.nodes ?? [];
	report('webhook-sim answers SHOPIFY_GQL_ORDERS_QUERY', st1 === 200 && !orders.errors && nodes.length > 0,
		JSON.stringify(orders).slice(0, 400));
	if (nodes.length) {
		const [st2, one] = await ask(defs.get('SHOPIFY_GQL_ORDER_QUERY'), { id: nodes[0].id });
		report('webhook-sim answers SHOPIFY_GQL_ORDER_QUERY', st2 === 200 && !one.errors && one.data?.order?.id === nodes[0].id,
			JSON.stringify(one).slice(0, 400));
	}
	// documents Shopify's schema refuses: webhook-sim refuses each, with the code Shopify uses
	const refused = [
		['an unknown argument', 'query { orders(first: 1, foo: 2) { nodes { id } } }', 'argumentNotAccepted'],
		['an object without a selection', 'query { order(id: "gid://shopify/Order/1") { totalPriceSet } }', 'selectionMismatch'],
		['a selection on a scalar', 'query { order(id: "gid://shopify/Order/1") { name { x } } }', 'selectionMismatch'],
		['a missing required argument', 'query { order { id } }', 'missingRequiredArguments'],
		['an undeclared variable', 'query Q { order(id: $id) { id } }', 'variableNotDefined'],
		['a mistyped variable', 'query Q($id: String!) { order(id: $id) { id } }', 'variableMismatch'],
		['an unused variable', 'query Q($x: String) { orders(first: 1) { nodes { id } } }', 'variableNotUsed'],
	];
	for (const [what, doc, code] of refused) {
		const schemaErrors = validate(schema, parse(doc));
		const [st, ans] = await ask(doc, { id: 'gid://shopify/Order/1' });
		report(`negative: ${what} is refused by the schema and by webhook-sim (${code})`,
			schemaErrors.length > 0 && st === 200 && ans?.errors?.[0]?.extensions?.code === code && !('data' in ans),
			`schema: ${schemaErrors.map((e) => e.message).join('; ')}; webhook-sim: ${JSON.stringify(ans)}`);
	}
	const [st4, syntax] = await ask('query { orders(first: 1) { nodes { id }', {});
	report('negative: a syntax error is answered with its location', st4 === 200 &&
		/^Parse error on/.test(syntax?.errors?.[0]?.message ?? '') && Array.isArray(syntax?.errors?.[0]?.locations),
		JSON.stringify(syntax));
	const form = await fetch(`${simUrl}/admin/api/2026-10/graphql.json`, {
		method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'query=x' });
	report('negative: a body that is not JSON is refused (415)', form.status === 415, String(form.status));
	const [st5, noq] = await ask(undefined, {});
	report('negative: a body without query is refused (400)', st5 === 400, JSON.stringify(noq));
	const [st6, cost] = await ask(defs.get('SHOPIFY_GQL_ORDERS_QUERY'), { first: 250, after: null, query: null });
	const ts = cost?.extensions?.cost?.throttleStatus;
	report('every answer carries the cost extension with its throttle status', st6 === 200 &&
		cost.extensions.cost.requestedQueryCost > 250 && ts?.maximumAvailable > 0 && ts?.restoreRate > 0 &&
		typeof ts?.currentlyAvailable === 'number', JSON.stringify(cost?.extensions));
	const [st3, wrong] = await ask(bad, { id: nodes[0]?.id ?? 'gid://shopify/Order/1' });
	const e = wrong?.errors?.[0];
	report('negative: webhook-sim answers the unknown field with Shopify\'s undefinedField error',
		st3 === 200 && e?.extensions?.code === 'undefinedField' && e?.extensions?.fieldName === 'financialStatusTypo' &&
		e?.message === "Field 'financialStatusTypo' doesn't exist on type 'Order'" && Array.isArray(e?.locations),
		JSON.stringify(wrong));
}
