/*
 * stripe_int.h
 *		What the simulator's Stripe files share (stripe_api.c routes,
 *		stripe_refunds.c answers POST /v1/refunds, stripe_params.c checks
 *		parameters).  Calls run stripe_api.c -> stripe_refunds.c ->
 *		stripe_params.c.
 */
#ifndef SIM_STRIPE_INT_H
#define SIM_STRIPE_INT_H

#include "api_int.h"

/* stripe_params.c */
/* Is w[0..n) one of the space-separated words? */
extern int	word_in(const char *words, const char *w, size_t n);
/* is v one of the space-separated words? */
extern int	one_of(const char *v, const char *words);
/* 400/403/404 invalid_request_error with the message fmt % arg */
extern void stripe_msg(struct evhttp_request *req, int code, const char *errcode, const char *param,
					   const char *fmt, const char *arg);
/* every parameter's name against the SDK's set; -1 with the error answered */
extern int	check_names(struct evhttp_request *req, sim_params *ps, const char *sdk,
						const char *implemented, int paged);
extern int	parse_ts(struct evhttp_request *req, const char *name, const char *v, int64_t *out);

/* stripe_refunds.c: POST /v1/refunds for account (0: the platform) */
extern void stripe_handle_refund(sim_api *api, struct evhttp_request *req, const char *path,
								 int account);

#endif							/* SIM_STRIPE_INT_H */
