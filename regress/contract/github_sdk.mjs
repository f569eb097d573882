// regress/contract/github_sdk.mjs
//	What @octokit/openapi (GitHub's own OpenAPI description of its REST
//	API, generated/api.github.com.json) declares: every path and method
//	with its query parameters ($ref'd ones resolved), and the schemas of the
//	objects, read from the package, never from the simulator.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let spec = null;

export function githubSpec()
{
	if (spec === null)
	{
		const file = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules', '@octokit',
			'openapi', 'generated', 'api.github.com.json');
		spec = JSON.parse(fs.readFileSync(file, 'utf8'));
	}
	return spec;
}

function resolve(p)
{
	if (!p.$ref)
		return p;
	return p.$ref.split('/').slice(1).reduce((o, k) => o[k], githubSpec());
}

// The operation of METHOD path (a concrete path such as /repos/a/b/issues/3), or null.
export function githubRoute(method, p)
{
	const s = githubSpec();
	let best = null;
	for (const [ tmpl, ops ] of Object.entries(s.paths))
	{
		const op = ops[method.toLowerCase()];
		if (!op)
			continue;
		const re = new RegExp('^' + tmpl.replace(/\{[^}]+\}/g, '[^/]+') + '$');
		if (!re.test(p))
			continue;
		const literal = tmpl.split('{').length;
		if (best === null || literal < best.literal)
		{
			const params = [ ...(ops.parameters || []), ...(op.parameters || []) ].map(resolve);
			best = { path: tmpl, literal, operationId: op.operationId,
				query: params.filter((x) => x.in === 'query').map((x) => x.name) };
		}
	}
	return best;
}

// The JSON schema of components.schemas[name].
export function githubSchema(name)
{
	return githubSpec().components.schemas[name];
}
