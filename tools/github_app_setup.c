/*
 * github_app_setup.c
 *		A GitHub App from the --github-app options (github_app.h): its key,
 *		its installations (--github-installation ID[:OWNER/REPO,...]) and
 *		their repositories; and freeing it.  github_app.c answers its
 *		endpoints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "github_app_int.h"

/* ---------- setup ---------- */

static int
add_installation(gh_app *app, const char *spec, const char *repo, char *err, size_t errlen)
{
	gh_installation *in = &app->inst[app->ninst];
	const char *colon = strchr(spec, ':');
	char	   *idtext = colon ? xstrndup(spec, (size_t) (colon - spec)) : xstrdup(spec);
	int			rc = parse_int64(idtext, 1, INT64_MAX / 2, &in->id);

	free(idtext);
	if (rc != 0)
	{
		snprintf(err, errlen, "--github-installation %s: the id is not a positive integer", spec);
		return -1;
	}
	for (int i = 0; i < app->ninst; i++)
		if (app->inst[i].id == in->id)
		{
			snprintf(err, errlen, "--github-installation %s: installation given twice", spec);
			return -1;
		}
	if (colon == NULL)
		in->repos[in->nrepos++] = xstrdup(repo);
	else
	{
		const char *p = colon + 1;

		while (*p)
		{
			const char *comma = strchr(p, ',');
			size_t		len = comma ? (size_t) (comma - p) : strlen(p);
			const char *sl = memchr(p, '/', len);

			if (len == 0 || sl == NULL || sl == p || (size_t) (sl - p) == len - 1 ||
				in->nrepos == GH_MAX_REPOS)
			{
				snprintf(err, errlen, "--github-installation %s: repositories are OWNER/NAME[,OWNER/NAME] (at most %d)",
						 spec, GH_MAX_REPOS);
				return -1;
			}
			in->repos[in->nrepos++] = xstrndup(p, len);
			p += len + (comma ? 1 : 0);
		}
	}
	in->state = GH_ACTIVE;
	in->created = now_epoch() - 86400 * (app->ninst + 1);
	app->ninst++;
	return 0;
}

gh_app *
gh_app_new(const gh_app_options *opt, const char *repo, uint64_t seed, char *err, size_t errlen)
{
	gh_app	   *app = xcalloc(1, sizeof(gh_app));
	FILE	   *f = NULL;

	app->app_id = xstrdup(opt->app_id);
	app->client_id = opt->client_id ? xstrdup(opt->client_id) : NULL;
	app->token_ttl = opt->token_ttl > 0 ? opt->token_ttl : 3600;
	app->rate_limit = opt->rate_limit;
	app->rate_window = opt->rate_window > 0 ? opt->rate_window : 3600;
	rng_seed(&app->rng, seed ^ 0x6a7bULL);
	if (opt->key_file == NULL)
	{
		snprintf(err, errlen, "--github-app needs --github-app-key FILE (the app's public key)");
		goto err;
	}
	f = fopen(opt->key_file, "r");
	if (f == NULL)
	{
		snprintf(err, errlen, "cannot open --github-app-key \"%s\"", opt->key_file);
		goto err;
	}
	app->key = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	if (app->key == NULL)
	{
		/* a private key holds the public one too */
		rewind(f);
		app->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	}
	fclose(f);
	if (app->key == NULL || EVP_PKEY_get_base_id(app->key) != EVP_PKEY_RSA)
	{
		snprintf(err, errlen, "--github-app-key \"%s\" holds no RSA key in PEM", opt->key_file);
		goto err;
	}
	for (int i = 0; i < opt->ninstallations; i++)
		if (add_installation(app, opt->installations[i], repo, err, errlen) != 0)
			goto err;
	return app;

err:
	gh_app_free(app);
	return NULL;
}

void
gh_app_free(gh_app *app)
{
	if (app == NULL)
		return;
	for (int i = 0; i < app->ninst; i++)
		for (int k = 0; k < app->inst[i].nrepos; k++)
			free(app->inst[i].repos[k]);
	EVP_PKEY_free(app->key);
	free(app->app_id);
	free(app->client_id);
	free(app->tokens);
	free(app);
}
