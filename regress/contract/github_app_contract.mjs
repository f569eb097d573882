// regress/contract/github_app_contract.mjs URL KEY.pem OTHER_KEY.pem APP_ID CLIENT_ID
//	Drives a running webhook-sim that is a GitHub App (--github-app APP_ID:CLIENT_ID,
//	--github-installation 101, --github-installation 102:acme/other,acme/anvils)
//	with the official clients: @octokit/auth-app's createAppAuth (the app's JWT
//	from universal-github-app-jwt, then an installation token from
//	POST /app/installations/{id}/access_tokens) over @octokit/request, and
//	@octokit/rest with authStrategy createAppAuth for apps.listInstallations
//	and apps.listReposAccessibleToInstallation (octokit.paginate) and a
//	repository read.  Every answer must carry the required properties of its
//	schema in @octokit/openapi ("installation-token", "installation",
//	"repository"); JWTs that break GitHub's rules (signed by another key, alg
//	HS256, exp more than 10 minutes after iat, iat in the future, expired,
//	another iss) are refused 401.  Suspends 102 and removes 101 last.
//	Prints one JSON line per check.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createAppAuth } from '@octokit/auth-app';
import { request } from '@octokit/request';
import { Octokit } from '@octokit/rest';
import { githubSchema } from './github_sdk.mjs';

const [ url, keyFile, otherKeyFile, appIdText, clientId ] = process.argv.slice(2);
const appId = Number(appIdText);
const privateKey = fs.readFileSync(keyFile, 'utf8');
const otherKey = fs.readFileSync(otherKeyFile, 'utf8');
const req = request.defaults({ baseUrl: url });

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
			out.push(`${schemaName}: missing ${r}`);
	for (const [ k, p ] of Object.entries(s.properties || {}))
		if (p.enum && obj[k] !== undefined && obj[k] !== null && !p.enum.includes(obj[k]))
			out.push(`${schemaName}: ${k}=${obj[k]} not in ${p.enum.join('|')}`);
	return out;
}

async function status(promise)
{
	try
	{
		const r = await promise;
		return { status: r.status, data: r.data };
	}
	catch (e)
	{
		return { status: e.status, message: e.response?.data?.message, name: e.name };
	}
}

function b64url(x)
{
	return Buffer.from(x).toString('base64url');
}

function jwt(claims, { key = privateKey, alg = 'RS256' } = {})
{
	const head = b64url(JSON.stringify({ alg, typ: 'JWT' })) + '.' + b64url(JSON.stringify(claims));
	const sig = alg === 'RS256' ? crypto.sign('sha256', Buffer.from(head), key)
		: crypto.createHmac('sha256', 'secret').update(head).digest();
	return head + '.' + b64url(sig);
}

// the app, as @octokit/auth-app authenticates it
const auth = createAppAuth({ appId, privateKey, request: req });
const app = await auth({ type: 'app' });
check(app.type === 'app' && app.token.split('.').length === 3, 'createAppAuth: an app JWT');
const inst = await auth({ type: 'installation', installationId: 101 });
check(inst.tokenType === 'installation' && /^ghs_/.test(inst.token) && inst.installationId === 101,
	'createAppAuth: an installation token from POST /app/installations/101/access_tokens', inst.token.slice(0, 4));
check(Date.parse(inst.expiresAt) > Date.now() && inst.repositorySelection === 'selected',
	'createAppAuth: expiresAt in the future and repository_selection read', inst.expiresAt);
const raw = await req('POST /app/installations/{installation_id}/access_tokens',
	{ installation_id: 101, headers: { authorization: `bearer ${app.token}` } });
const tp = schemaProblems(raw.data, 'installation-token');
check(raw.status === 201 && tp.length === 0, 'the token answer: 201 with the schema "installation-token"', tp.join('; '));
const byClient = await createAppAuth({ appId: clientId, privateKey, request: req })({ type: 'installation', installationId: 101 });
check(/^ghs_/.test(byClient.token), 'the client id as iss works too (appId: client id)');

// listing installations and their repositories with @octokit/rest
const appOctokit = new Octokit({ baseUrl: url, authStrategy: createAppAuth, auth: { appId, privateKey }, request: { retries: 0 } });
const installations = await appOctokit.paginate(appOctokit.rest.apps.listInstallations, { per_page: 1 });
const ip = installations.flatMap((i) => schemaProblems(i, 'installation'));
check(installations.length === 2 && installations.map((i) => i.id).join(',') === '101,102',
	'apps.listInstallations with octokit.paginate (per_page 1, Link pages)', installations.map((i) => i.id).join(','));
check(ip.length === 0, 'every installation has the required properties of schema "installation"', ip.slice(0, 5).join('; '));
const i102 = new Octokit({ baseUrl: url, authStrategy: createAppAuth,
	auth: { appId, privateKey, installationId: 102 }, request: { retries: 0 } });
const repos = await i102.paginate(i102.rest.apps.listReposAccessibleToInstallation, { per_page: 1 });
const rp = repos.flatMap((r) => schemaProblems(r, 'repository'));
check(repos.map((r) => r.full_name).sort().join(',') === 'acme/anvils,acme/other',
	'apps.listReposAccessibleToInstallation with octokit.paginate: the installation\'s repositories', repos.map((r) => r.full_name));
check(rp.length === 0, 'every repository has the required properties of schema "repository"', rp.slice(0, 5).join('; '));
const issues = await i102.rest.issues.listForRepo({ owner: 'acme', repo: 'anvils', state: 'all', per_page: 5 });
check(issues.status === 200 && issues.data.length > 0, 'issues.listForRepo with the installation\'s token', issues.data.length);
const i101 = new Octokit({ baseUrl: url, authStrategy: createAppAuth,
	auth: { appId, privateKey, installationId: 101 }, request: { retries: 0 } });
const other = await status(i101.rest.issues.listForRepo({ owner: 'acme', repo: 'other' }));
check(other.status === 404, 'a repository the installation was not granted: 404', other.status);
const noToken = await status(req('GET /repos/{owner}/{repo}/issues', { owner: 'acme', repo: 'anvils' }));
check(noToken.status === 401 && noToken.message === 'Bad credentials', 'a read without a token: 401 Bad credentials', noToken.status);
const jwtRead = await status(req('GET /repos/{owner}/{repo}/issues', { owner: 'acme', repo: 'anvils', headers: { authorization: `bearer ${app.token}` } }));
check(jwtRead.status === 401, 'a read with the app\'s JWT instead of an installation token: 401', jwtRead.status);

// JWTs that break GitHub's rules
const now = Math.floor(Date.now() / 1000);
const bad = [
	[ 'signed with another key', jwt({ iat: now - 60, exp: now + 540, iss: appId }, { key: otherKey }), 'A JSON web token could not be decoded' ],
	[ 'alg HS256', jwt({ iat: now - 60, exp: now + 540, iss: appId }, { alg: 'HS256' }), 'A JSON web token could not be decoded' ],
	[ 'exp 601 s after iat', jwt({ iat: now - 60, exp: now + 541, iss: appId }), '\'Expiration time\' claim (\'exp\') is too far in the future' ],
	[ 'iat 2 minutes ahead', jwt({ iat: now + 120, exp: now + 300, iss: appId }), '\'Issued at\' claim (\'iat\') must be an Integer representing a time in the past' ],
	[ 'iat not an integer', jwt({ iat: now - 0.5, exp: now + 300, iss: appId }), '\'Issued at\' claim (\'iat\') must be an Integer representing the time that the assertion was issued' ],
	[ 'expired', jwt({ iat: now - 700, exp: now - 100, iss: appId }), '\'Expiration time\' claim (\'exp\') must be a numeric value representing the future time at which the assertion expires' ],
	[ 'another app id', jwt({ iat: now - 60, exp: now + 540, iss: appId + 1 }), '\'Issuer\' claim (\'iss\') must be the app\'s ID or client ID' ],
	[ 'no iss', jwt({ iat: now - 60, exp: now + 540 }), '\'Issuer\' claim (\'iss\') must be the app\'s ID or client ID' ],
	[ 'not a JWT', 'ghp_plain', 'A JSON web token could not be decoded' ],
];
for (const [ name, token, message ] of bad)
{
	const r = await status(req('POST /app/installations/{installation_id}/access_tokens',
		{ installation_id: 101, headers: { authorization: `Bearer ${token}` } }));
	check(r.status === 401 && r.message === message, `a JWT ${name}: 401 "${message}"`, `${r.status} ${r.message}`);
}
const list = await status(req('GET /app/installations', { headers: { authorization: `Bearer ${bad[0][1]}` } }));
check(list.status === 401, 'GET /app/installations with a bad JWT: 401', list.status);

// suspended and removed installations
await fetch(new URL('/_sim/github/installations/102?state=suspended', url), { method: 'POST' });
await fetch(new URL('/_sim/github/installations/101?state=removed', url), { method: 'POST' });
const suspended = await status(createAppAuth({ appId, privateKey, request: req })({ type: 'installation', installationId: 102 }));
check(suspended.status === 403 && suspended.message === 'This installation has been suspended',
	'a suspended installation: 403 "This installation has been suspended" through createAppAuth', `${suspended.status} ${suspended.message}`);
const removed = await status(createAppAuth({ appId, privateKey, request: req })({ type: 'installation', installationId: 101 }));
check(removed.status === 404, 'a removed installation: 404 through createAppAuth', removed.status);
const unknown = await status(createAppAuth({ appId, privateKey, request: req })({ type: 'installation', installationId: 999 }));
check(unknown.status === 404, 'an installation that never was: 404', unknown.status);
const oldToken = await status(req('GET /repos/{owner}/{repo}/issues', { owner: 'acme', repo: 'anvils', headers: { authorization: `token ${inst.token}` } }));
check(oldToken.status === 401, 'the token of a removed installation: 401', oldToken.status);
const suspRead = await status(i102.rest.issues.listForRepo({ owner: 'acme', repo: 'anvils' }));
check(suspRead.status === 403, 'the token of a suspended installation: 403', suspRead.status);
const listed = await appOctokit.paginate(appOctokit.rest.apps.listInstallations, { per_page: 100 });
check(listed.length === 1 && listed[0].id === 102 && listed[0].suspended_at !== null && listed[0].suspended_by !== null,
	'apps.listInstallations: the removed one is gone, the suspended one has suspended_at and suspended_by', listed.map((i) => i.id));
