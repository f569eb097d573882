// regress/contract/stripe_sdk.mjs
//	What the official stripe-node package declares, read from its own files
//	(never from the simulator): every API method's HTTP method and path
//	(cjs/resources/**/*.js, `this._makeRequest('GET', '/v1/…')`), the params
//	interface of each method (the .d.ts next to it, e.g. `list(params?:
//	SubscriptionListParams …)`) with the top-level fields and their types,
//	and string unions such as Subscription.Status or Event.Type.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// the package as npm installed it next to this file
export function stripeDir()
{
	return path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules', 'stripe');
}

function walk(dir, out = [])
{
	for (const e of fs.readdirSync(dir, { withFileTypes: true }))
	{
		const p = path.join(dir, e.name);
		if (e.isDirectory())
			walk(p, out);
		else
			out.push(p);
	}
	return out;
}

// The body of `interface NAME …{ … }` in text: its top-level members.
export function interfaceFields(text, name)
{
	const short = name.split('.').pop();
	const re = new RegExp(`interface ${short}(\\s+extends\\s+([\\w.]+))?\\s*\\{`);
	const m = re.exec(text);
	if (!m)
		return null;
	const fields = {};
	let depth = 1, i = m.index + m[0].length, line = '';
	for (; i < text.length && depth > 0; i++)
	{
		const c = text[i];
		if (c === '{')
			depth++;
		else if (c === '}')
			depth--;
		if (c === '\n')
		{
			const f = /^\s*(\w+)\??:\s*(.*?);?\s*$/.exec(line);
			if (f && line.startsWith(' ') && depthAtLineStart === 1)
				fields[f[1]] = f[2];
			line = '';
			depthAtLineStart = depth;
			continue;
		}
		line += c;
	}
	if (m[2] === 'PaginationParams')
		Object.assign(fields, { limit: 'number', starting_after: 'string', ending_before: 'string' });
	return fields;
}
let depthAtLineStart = 1;

// Every method: { resource, name, method, path (template), regex, params (fields) }.
export function stripeRoutes()
{
	const dir = path.join(stripeDir(), 'cjs', 'resources');
	const routes = [];
	for (const js of walk(dir).filter((f) => f.endsWith('.js')))
	{
		const src = fs.readFileSync(js, 'utf8');
		const dts = fs.existsSync(js.replace(/\.js$/, '.d.ts')) ? fs.readFileSync(js.replace(/\.js$/, '.d.ts'), 'utf8') : '';
		// a method's first request (accounts.retrieve(id) tests its id first)
		const re = /\n    (\w+)\([^)]*\)\s*\{\s*(?:if \(typeof \w+ === 'string'\) \{\s*)?return this\._makeRequest\('(\w+)',\s*(?:`([^`]+)`|'([^']+)')/g;
		let m;
		while ((m = re.exec(src)) !== null)
		{
			const tmpl = (m[3] || m[4]).replace(/\$\{encodeURIComponent\((\w+)\)\}/g, '{$1}');
			const sig = new RegExp(`\\n    ${m[1]}\\((?:\\w+: string, )*params\\??: ([\\w.]+)`).exec(dts);
			depthAtLineStart = 1;
			const params = sig ? interfaceFields(dts, sig[1]) : {};
			routes.push({
				resource: path.relative(dir, js), name: m[1], method: m[2], path: tmpl,
				iface: sig ? sig[1] : null, params: params || {},
				regex: new RegExp('^' + tmpl.replace(/\{\w+\}/g, '[^/]+') + '$'),
			});
		}
	}
	return routes;
}

// The members of a string union `type NAME = 'a' | 'b' | OtherString;` in a .d.ts.
export function stringUnion(file, namespace, name)
{
	const text = fs.readFileSync(path.join(stripeDir(), 'cjs', 'resources', file), 'utf8');
	const ns = text.indexOf(`namespace ${namespace} {`);
	const from = ns >= 0 ? ns : 0;
	const m = new RegExp(`type ${name} = ([^;]+);`).exec(text.slice(from));
	if (!m)
		return null;
	return m[1].split('|').map((s) => s.trim()).filter((s) => s.startsWith("'")).map((s) => s.slice(1, -1));
}

// The route of a request line, or null (literal paths win over templates).
export function routeOf(routes, method, p)
{
	const hits = routes.filter((r) => r.method === method && r.regex.test(p));
	hits.sort((a, b) => (b.path.split('{').length === 1) - (a.path.split('{').length === 1));
	return hits[0] || null;
}

// Decoded (name, value) pairs of a query string or form body.
export function formPairs(s)
{
	if (!s)
		return [];
	return s.split('&').filter(Boolean).map((kv) => {
		const i = kv.indexOf('=');
		const dec = (x) => decodeURIComponent(x.replace(/\+/g, ' '));
		return i < 0 ? [ dec(kv), '' ] : [ dec(kv.slice(0, i)), dec(kv.slice(i + 1)) ];
	});
}

// Problems of one parameter name against the route's declared fields.
export function paramProblem(route, name)
{
	const m = /^(\w+)((?:\[[^\]]*\])*)$/.exec(name);
	if (!m)
		return `malformed parameter name ${name}`;
	const type = route.params[m[1]];
	if (type === undefined)
		return `${name}: not a field of ${route.iface || 'a method without params'}`;
	const subs = [ ...m[2].matchAll(/\[([^\]]*)\]/g) ].map((x) => x[1]);
	if (subs.length === 0)
		return null;
	if (/RangeQueryParam/.test(type))
		return subs.length === 1 && [ 'gt', 'gte', 'lt', 'lte' ].includes(subs[0]) ? null
			: `${name}: a RangeQueryParam takes [gt|gte|lt|lte]`;
	if (/^Array</.test(type))
		return subs.length === 1 && /^\d*$/.test(subs[0]) ? null : `${name}: an array takes [] or [N]`;
	if (/MetadataParam|\{|\.\w+/.test(type) || /^[A-Z]/.test(type.split('.').pop()))
		return null;			// metadata or a nested params object
	return `${name}: ${m[1]} is a ${type}, not an object`;
}
