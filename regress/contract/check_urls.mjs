// regress/contract/check_urls.mjs REQUEST_LOG
//	Checks every request of a webhook-sim --request-log against what
//	stripe-node declares: the method and path must be an SDK method's
//	(cjs/resources/**/*.js), and every query parameter (and form parameter of
//	a POST) a field of that method's params interface (its .d.ts), with
//	subscripts only where the field's type has them (RangeQueryParam
//	[gt|gte|lt|lte], arrays [] or [N], metadata and nested objects).
//	GitHub paths (/repos/…, and a GitHub App's /app/… and /installation/…)
//	are checked against @octokit/openapi: the path and method must be an
//	operation of api.github.com.json, every query parameter one of its
//	parameters (a POST's JSON body is not a query).  Other paths (Shopify)
//	are skipped.
//	Prints one JSON line per distinct request shape:
//	{"ok":bool,"request":"GET /v1/subscriptions?limit&status","route":…,"problems":[…]}.
import fs from 'node:fs';
import { stripeRoutes, routeOf, formPairs, paramProblem } from './stripe_sdk.mjs';
import { githubRoute } from './github_sdk.mjs';

const routes = stripeRoutes();
const seen = new Map();
for (const line of fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean))
{
	const [ method, target, body ] = line.split(' ');
	const q = target.indexOf('?');
	const path = q < 0 ? target : target.slice(0, q);
	const names = [ ...formPairs(q < 0 ? '' : target.slice(q + 1)), ...formPairs(body || '') ].map((p) => p[0]);
	if (path.startsWith('/repos/') || path.startsWith('/app/') || path.startsWith('/installation/'))
	{
		const names = formPairs(q < 0 ? '' : target.slice(q + 1)).map((p) => p[0]);
		const shape = `${method} ${path.replace(/\/\d+$/, '/{n}')}?${[ ...new Set(names) ].sort().join('&')}`;
		if (seen.has(shape))
			continue;
		const gr = githubRoute(method, path);
		const problems = gr ? names.filter((n) => !gr.query.includes(n)).map((n) => `${n}: not a query parameter of ${gr.operationId}`)
			: [ `${method} ${path}: no operation of @octokit/openapi has this path` ];
		seen.set(shape, { ok: problems.length === 0, request: shape,
			route: gr ? `${gr.operationId} ${gr.path}` : null, problems });
		continue;
	}
	if (!path.startsWith('/v1/'))
		continue;
	const shape = `${method} ${path.replace(/\/(sub|pi|in|re|ch|dp|cus|cs_test|evt|acct)_[A-Za-z0-9]+/g, '/$1_…')}?${[ ...new Set(names.map((n) => n.replace(/\[\d+\]$/, '[]'))) ].sort().join('&')}`;
	if (seen.has(shape))
		continue;
	const route = routeOf(routes, method, path);
	const problems = route ? names.map((n) => paramProblem(route, n)).filter(Boolean)
		: [ `${method} ${path}: no stripe-node method has this path` ];
	seen.set(shape, { ok: problems.length === 0, request: shape,
		route: route ? `${route.resource} ${route.name}(${route.iface || ''})` : null, problems });
}
for (const v of seen.values())
	console.log(JSON.stringify(v));
