/*
 * github_app.h
 *		webhook-sim as a GitHub App's side of GitHub (github_app.c): app
 *		JWTs, installations, installation access tokens.
 */
#ifndef SIM_GITHUB_APP_H
#define SIM_GITHUB_APP_H

#include <stdint.h>

#define GH_APP_MAX_INSTALLATIONS 64

typedef struct gh_app_options
{
	const char *app_id;			/* NULL: the API is not a GitHub App's */
	const char *client_id;		/* also accepted as the JWT's iss, or NULL */
	const char *key_file;		/* the app's public key (or private key), PEM */
	int			token_ttl;		/* seconds an installation token lasts (3600) */
	int			rate_limit;		/* requests per installation per window; 0: none */
	int			rate_window;	/* seconds (3600) */
	/* "ID[:OWNER/REPO[,OWNER/REPO...]]": the repositories it was granted */
	const char *installations[GH_APP_MAX_INSTALLATIONS];
	int			ninstallations;
} gh_app_options;

typedef struct gh_app gh_app;

/*
 * The app of opt for a model whose repository is repo (an installation
 * named without repositories has that one); NULL with a reason in err.
 */
extern gh_app *gh_app_new(const gh_app_options *opt, const char *repo, uint64_t seed,
						  char *err, size_t errlen);
extern void gh_app_free(gh_app *app);

#endif							/* SIM_GITHUB_APP_H */
