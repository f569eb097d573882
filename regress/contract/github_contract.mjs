// regress/contract/github_contract.mjs URL OWNER/REPO TOKEN
//	Drives a running webhook-sim with the official @octokit/rest client:
//	the issues list with octokit.paginate (Link header, state=all, since,
//	per_page), single issues and pull requests, the pulls list, and a
//	missing one as the SDK's RequestError 404.  Every object must carry the
//	required properties of its schema in @octokit/openapi ("issue",
//	"pull-request", "pull-request-simple"), with enum values it declares.
//	Prints one JSON line per check.
import { Octokit } from '@octokit/rest';
import { githubSchema } from './github_sdk.mjs';

const [ url, full, token ] = process.argv.slice(2);
const [ owner, repo ] = full.split('/');
const octokit = new Octokit({ baseUrl: url, auth: token, request: { retries: 0 } });

function check(ok, name, detail)
{
	console.log(JSON.stringify({ ok: !!ok, name, detail: detail === undefined ? null : String(detail) }));
}

function schemaProblems(obj, schemaName)
{
	const s = githubSchema(schemaName);
	const out = [];
	for (const r of s.required || [])
		if (!(r in obj))
			out.push(`missing ${r}`);
	for (const [ k, p ] of Object.entries(s.properties || {}))
		if (p.enum && obj[k] !== undefined && obj[k] !== null && !p.enum.includes(obj[k]))
			out.push(`${k}=${obj[k]} not in ${p.enum.join('|')}`);
	return out;
}

const truth = await (await fetch(new URL('/_sim/truth', url))).json();
const issues = truth.objects.filter((o) => o.type === 'issue');
const pulls = truth.objects.filter((o) => o.type === 'pull_request');
check(issues.length > 0 && pulls.length > 0, 'the scenario has issues and pull requests', `${issues.length} ${pulls.length}`);

const all = await octokit.paginate(octokit.rest.issues.listForRepo, { owner, repo, state: 'all', per_page: 7 });
const byNumber = new Map(all.map((i) => [ i.number, i ]));
check(all.length === issues.length + pulls.length && byNumber.size === all.length,
	'issues.listForRepo with octokit.paginate lists every issue and pull request once', `${all.length}`);
const ids = new Set(all.map((i) => String(i.id)));
check(issues.every((o) => ids.has(o.id)), 'issue ids are the ids of the truth');
const probs = all.flatMap((i) => schemaProblems(i, 'issue'));
check(probs.length === 0, 'every listed item has the required properties of schema "issue"', probs.slice(0, 5).join('; '));
check(all.filter((i) => i.pull_request).length === pulls.length, 'pull requests are in the issues list with pull_request');
const open = await octokit.paginate(octokit.rest.issues.listForRepo, { owner, repo, per_page: 100 });
check(open.length > 0 && open.every((i) => i.state === 'open'), 'the default state is open', open.length);
const upd = all.map((i) => i.updated_at).sort();
const mid = upd[Math.floor(upd.length / 2)];
const since = await octokit.paginate(octokit.rest.issues.listForRepo,
	{ owner, repo, state: 'all', since: mid, sort: 'updated', direction: 'asc', per_page: 5 });
check(since.length === all.filter((i) => i.updated_at >= mid).length && since.every((i) => i.updated_at >= mid),
	'since filters on updated_at', `${since.length}`);
check(since.every((x, k) => k === 0 || since[k - 1].updated_at <= x.updated_at), 'sort=updated&direction=asc');

const issue = all.find((i) => !i.pull_request);
const got = await octokit.rest.issues.get({ owner, repo, issue_number: issue.number });
check(got.status === 200 && got.data.id === issue.id && got.data.state === issue.state, 'issues.get');
const pr = all.find((i) => i.pull_request);
const p = await octokit.rest.pulls.get({ owner, repo, pull_number: pr.number });
const pp = schemaProblems(p.data, 'pull-request');
check(p.status === 200 && p.data.number === pr.number && pulls.some((o) => o.id === String(p.data.id)),
	'pulls.get: the pull request with its own id', p.data.id);
check(pp.length === 0, 'pulls.get: the required properties and enum values of schema "pull-request"', pp.join('; '));
const plist = await octokit.paginate(octokit.rest.pulls.list, { owner, repo, state: 'all', per_page: 4 });
check(plist.length === pulls.length, 'pulls.list with octokit.paginate', plist.length);
try
{
	await octokit.rest.issues.get({ owner, repo, issue_number: 999999 });
	check(false, 'a missing issue: RequestError 404');
}
catch (e)
{
	check(e.name === 'HttpError' && e.status === 404, 'a missing issue: the SDK\'s RequestError with status 404', `${e.name} ${e.status}`);
}
