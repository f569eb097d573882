/*
 * github_app_int.h
 *		A GitHub App's state as the simulator keeps it: its installations,
 *		their repositories and tokens.  Shared by github_app_setup.c (from
 *		the options) and github_app.c (the endpoints).
 */
#ifndef SIM_GITHUB_APP_INT_H
#define SIM_GITHUB_APP_INT_H

#include <openssl/evp.h>

#include "api_int.h"
#include "github_app.h"

#define GH_SKEW_S		60		/* how far in the future iat may be */
#define GH_MAX_JWT_S	600		/* exp at most this after iat */
#define GH_DOCS_TOKEN "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
#define GH_DOCS_APPS "https://docs.github.com/rest/apps/apps"
#define GH_DOCS_REPOS "https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation"
#define GH_MAX_REPOS 16

enum gh_state
{
	GH_ACTIVE,
	GH_SUSPENDED,
	GH_REMOVED
};

typedef struct gh_installation
{
	int64_t		id;
	enum gh_state state;
	int64_t		created;
	int64_t		suspended_at;
	char	   *repos[GH_MAX_REPOS];	/* owner/name */
	int			nrepos;
	long		tokens;			/* issued */
	int64_t		window_start;	/* --github-rate-limit: the current window */
	long		used;			/* requests in it */
	long		rate_limited;	/* requests answered 403 rate limit exceeded */
} gh_installation;

typedef struct gh_token
{
	char		token[41];		/* ghs_ and 36 characters */
	int			inst;			/* index */
	int64_t		expires_at;
} gh_token;

struct gh_app
{
	char	   *app_id;
	char	   *client_id;
	EVP_PKEY   *key;
	int			token_ttl;
	gh_installation inst[GH_APP_MAX_INSTALLATIONS];
	int			ninst;
	gh_token   *tokens;
	long		ntokens;
	sim_rng		rng;
	long		jwt_refused;
	int			rate_limit;		/* per installation per window; 0: none */
	int			rate_window;
};

#endif							/* SIM_GITHUB_APP_INT_H */
