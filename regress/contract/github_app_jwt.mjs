// regress/contract/github_app_jwt.mjs JWT PUBLIC_KEY.pem PRIVATE_KEY.pem ISS
//	Checks a JWT that webhook_inbox minted (webhook_inbox._github_app_jwt())
//	against GitHub's rules for a GitHub App's JWT, independently of the C
//	code: the RS256 signature verified by Node's crypto with the app's public
//	key; the header {"alg":"RS256","typ":"JWT"}; each part base64url without
//	padding; iat an integer a little in the past (at most 2 minutes), exp an
//	integer in the future and at most 10 minutes after iat; iss the client id
//	or app id given.  Then the same claims as universal-github-app-jwt (the
//	JWT library of @octokit/auth-app) makes them for the same key.
//	Prints one JSON line per check.
import crypto from 'node:crypto';
import fs from 'node:fs';
import githubAppJwt from 'universal-github-app-jwt';

const [ token, pubFile, keyFile, iss ] = process.argv.slice(2);
const publicKey = fs.readFileSync(pubFile, 'utf8');

function check(ok, name, detail)
{
	console.log(JSON.stringify({ ok: !!ok, name, detail: detail === undefined ? null : String(detail) }));
}

const parts = token.split('.');
check(parts.length === 3, 'three parts', parts.length);
check(parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p)), 'each part base64url without padding');
const signed = crypto.verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), publicKey, Buffer.from(parts[2], 'base64url'));
check(signed, 'the RS256 signature verifies with the app\'s public key (RSASSA-PKCS1-v1_5, SHA-256)');
const tampered = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(parts[1], 'base64url')), iss: 'other' })).toString('base64url');
check(!crypto.verify('sha256', Buffer.from(`${parts[0]}.${tampered}`), publicKey, Buffer.from(parts[2], 'base64url')),
	'the signature covers the claims (changed claims do not verify)');
const header = JSON.parse(Buffer.from(parts[0], 'base64url'));
check(JSON.stringify(header) === '{"alg":"RS256","typ":"JWT"}', 'header {"alg":"RS256","typ":"JWT"}', JSON.stringify(header));
const claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
const now = Math.floor(Date.now() / 1000);
check(Number.isInteger(claims.iat) && claims.iat <= now && claims.iat >= now - 120,
	'iat: an integer a little in the past (for clock drift)', claims.iat - now);
check(Number.isInteger(claims.exp) && claims.exp > now && claims.exp - claims.iat <= 600,
	'exp: an integer in the future, at most 10 minutes after iat', claims.exp - claims.iat);
check(String(claims.iss) === iss, 'iss: the app\'s client id or app id', claims.iss);
check(Object.keys(claims).sort().join(',') === 'exp,iat,iss', 'claims iat, exp and iss only', Object.keys(claims));

const ref = await githubAppJwt({ id: iss, privateKey: fs.readFileSync(keyFile, 'utf8') });
const refParts = ref.token.split('.');
const refHeader = JSON.parse(Buffer.from(refParts[0], 'base64url'));
const refClaims = JSON.parse(Buffer.from(refParts[1], 'base64url'));
check(refHeader.alg === header.alg && refHeader.typ === header.typ, 'the header universal-github-app-jwt writes', JSON.stringify(refHeader));
check(Object.keys(refClaims).sort().join(',') === Object.keys(claims).sort().join(',') && refClaims.iss === claims.iss,
	'the claims universal-github-app-jwt writes', JSON.stringify(refClaims));
check(crypto.verify('sha256', Buffer.from(`${refParts[0]}.${refParts[1]}`), publicKey, Buffer.from(refParts[2], 'base64url')),
	'universal-github-app-jwt\'s JWT verifies the same way (the verifier is sound)');
