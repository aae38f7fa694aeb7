/*
 * ncg.c
 *	  ALS-NCG: one ALS sweep as the nonlinear preconditioner of a conjugate
 *	  gradient method over all factors (Winlaw, Hynes, Caterini and De
 *	  Sterck, arXiv:1508.03110).
 *
 * An iteration from the factors z (X and Y together) computes the gradient
 * g of L at z and runs the engine's sweep, which leaves zs = ALS(z).  The
 * preconditioned gradient is p = z - zs, the step the sweep took backwards,
 * and the direction is d = -p + beta d', with the Polak-Ribiere factor of
 * the preconditioned method, beta = g.(p - p') / (g'.p'), floored at zero
 * (primes: the previous iteration's).  Along d, L is an exact quartic
 * (src/core/accel.c), so the step is its minimum rather than the result of
 * trial evaluations.  The iteration keeps z + t d only when it is below
 * L(zs), and otherwise keeps zs and restarts with d = -p: so an
 * accelerated training never ends worse than the sweeps it is made of, and
 * every iteration's loss is at most the one before.  A direction that does
 * not descend (g.d >= 0) restarts too.
 *
 * The vectors live in the engine (the CPU engine's workspace, the GPU's
 * memory); this file only decides, through the engine's operations.
 */
#include "postgres.h"

#include <math.h>

#include "wals_train.h"

/* The spare vectors: z, g, p and d of the text above. */
#define NCG_START		1
#define NCG_GRADIENT	2
#define NCG_PRECOND		3
#define NCG_DIRECTION	4

StaticAssertDecl(NCG_DIRECTION < WALS_ACCEL_VECTORS, "ALS-NCG needs four spare vectors");

/*
 * A step must lower L below the sweep's by more than the rounding of the
 * two ways of computing it, or it costs a refresh of the Grams for nothing.
 */
#define NCG_MIN_GAIN	1e-9

void
wals_ncg_init(WalsNcg *ncg)
{
	ncg->restart = true;
	ncg->gp = 0;
	ncg->steps = 0;
}

bool
wals_ncg_iterate(const WalsEngine *engine, void *state, WalsNcg *ncg,
				 double *loss, double *step, WalsFailure *failure)
{
	double		swept;
	double		gp;
	double		gp_old = 0;
	double		beta = 0;
	double		coef[WALS_LINE_TERMS];
	double		t;
	double		value;

	*step = 0;
	if (!engine->gradient(state, NCG_GRADIENT, failure) ||
		!engine->combine(state, NCG_START, 1, WALS_VEC_FACTORS, 0, WALS_VEC_FACTORS, failure) ||
		!engine->iterate(state, &swept, failure))
		return false;
	*loss = swept;

	if (!ncg->restart && !engine->dot(state, NCG_GRADIENT, NCG_PRECOND, &gp_old, failure))
		return false;
	if (!engine->combine(state, NCG_PRECOND, 1, NCG_START, -1, WALS_VEC_FACTORS, failure) ||
		!engine->dot(state, NCG_GRADIENT, NCG_PRECOND, &gp, failure))
		return false;

	/* The sweep did not descend: float noise is all that is left. */
	if (!(gp > 0))
	{
		ncg->restart = true;
		return true;
	}
	if (!ncg->restart && ncg->gp > 0)
		beta = Max(0.0, (gp - gp_old) / ncg->gp);
	ncg->gp = gp;
	if (!engine->combine(state, NCG_DIRECTION, -1, NCG_PRECOND, beta, NCG_DIRECTION, failure))
		return false;
	if (beta > 0)
	{
		double		gd;

		if (!engine->dot(state, NCG_GRADIENT, NCG_DIRECTION, &gd, failure))
			return false;
		if (!(gd < 0) &&
			!engine->combine(state, NCG_DIRECTION, -1, NCG_PRECOND, 0, NCG_DIRECTION, failure))
			return false;
	}

	if (!engine->line(state, NCG_START, NCG_DIRECTION, coef, failure))
		return false;
	if (!wals_quartic_min(coef, &t, &value) || !(t > 0) ||
		!(value < swept - NCG_MIN_GAIN * fabs(swept)))
	{
		ncg->restart = true;
		return true;
	}
	if (!engine->combine(state, WALS_VEC_FACTORS, 1, NCG_START, t, NCG_DIRECTION, failure))
		return false;
	ncg->restart = false;
	ncg->steps++;
	*loss = value;
	*step = t;
	return true;
}
