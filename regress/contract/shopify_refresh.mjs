// regress/contract/shopify_refresh.mjs URL SHOP CLIENT_ID CLIENT_SECRET REFRESH_TOKEN [EXTENSION_BODY]
//	A Shopify app's expiring offline token refreshed by the official client:
//	@shopify/shopify-api's auth.refreshToken({shop, refreshToken}) POSTs to
//	https://{shop}/admin/oauth/access_token (here webhook-sim's
//	/shops/{shop}/admin/oauth/access_token: the runtime's fetch is pointed at
//	it) and makes a Session of the answer: the session must carry the new
//	access token, its expiry (expires_in), the rotated refresh token and the
//	refresh token's expiry (refresh_token_expires_in), as OfflineAccessInfo
//	types them.  The spent refresh token is then refused, and the new one
//	works once.  EXTENSION_BODY, when given, is a body the extension sent to
//	the same endpoint: it must have exactly the members the SDK's body has.
//	Prints one JSON line per check.
import '@shopify/shopify-api/adapters/node';
import { shopifyApi, ApiVersion } from '@shopify/shopify-api';
import { setAbstractFetchFunc } from '@shopify/shopify-api/runtime';

const [ url, shop, clientId, clientSecret, refreshToken, extensionBody ] = process.argv.slice(2);

function check(ok, name, detail)
{
	console.log(JSON.stringify({ ok: !!ok, name, detail: detail === undefined ? null : String(detail) }));
}

let sent = null;
setAbstractFetchFunc(async (target, options) => {
	const u = new URL(target);
	sent = { url: target, options };
	return fetch(`${url}/shops/${u.host}${u.pathname}${u.search}`, options);
});

const shopify = shopifyApi({
	apiKey: clientId,
	apiSecretKey: clientSecret,
	apiVersion: ApiVersion.July25 ?? Object.values(ApiVersion)[0],
	hostName: 'app.example.com',
	isEmbeddedApp: false,
	logger: { level: 0 },
});

try
{
	const { session } = await shopify.auth.refreshToken({ shop, refreshToken });
	check(sent && sent.url === `https://${shop}/admin/oauth/access_token`, 'the SDK posts to https://{shop}/admin/oauth/access_token', sent && sent.url);
	const body = JSON.parse(sent.options.body);
	check(JSON.stringify(Object.keys(body).sort()) === JSON.stringify([ 'client_id', 'client_secret', 'grant_type', 'refresh_token' ]),
		'the SDK body has client_id, client_secret, refresh_token, grant_type', Object.keys(body));
	check(body.grant_type === 'refresh_token', 'grant_type is refresh_token', body.grant_type);
	check(typeof session.accessToken === 'string' && session.accessToken.length > 0, 'webhook-sim\'s answer gives the session an access token');
	check(session.expires instanceof Date && session.expires.getTime() > Date.now(), 'and its expiry (expires_in)', session.expires);
	check(typeof session.refreshToken === 'string' && session.refreshToken !== refreshToken,
		'and a new refresh token (rotated on every use)');
	check(session.refreshTokenExpires instanceof Date && session.refreshTokenExpires.getTime() > session.expires.getTime(),
		'and the refresh token\'s expiry (refresh_token_expires_in)', session.refreshTokenExpires);
	check(session.shop === shop && !session.isOnline, 'an offline session of the shop', `${session.shop} ${session.isOnline}`);

	let refused = null;
	try
	{
		await shopify.auth.refreshToken({ shop, refreshToken });
	}
	catch (e)
	{
		refused = e;
	}
	check(refused && refused.response && refused.response.code === 400,
		'the spent refresh token is refused 400', refused && refused.response && refused.response.code);
	check(refused && refused.response && refused.response.body && refused.response.body.error === 'invalid_grant',
		'with the OAuth error invalid_grant', refused && JSON.stringify(refused.response && refused.response.body));
	const again = await shopify.auth.refreshToken({ shop, refreshToken: session.refreshToken });
	check(again.session.accessToken && again.session.refreshToken !== session.refreshToken, 'the new refresh token works once');
	console.log(JSON.stringify({ ok: true, name: 'final refresh token', detail: again.session.refreshToken, final: again.session.refreshToken }));

	if (extensionBody)
	{
		const ext = JSON.parse(extensionBody);
		check(JSON.stringify(Object.keys(ext).sort()) === JSON.stringify(Object.keys(body).sort()),
			'the extension\'s refresh body has exactly the SDK\'s members', Object.keys(ext));
		check(ext.grant_type === body.grant_type && ext.client_id === body.client_id && ext.client_secret === body.client_secret,
			'with the same grant_type, client_id and client_secret');
	}
}
catch (e)
{
	check(false, 'the SDK refresh completed', e && (e.stack || e));
}
