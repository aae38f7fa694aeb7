/*
 * ncg.c
 *	  ALS-NCG: one ALS sweep as the nonlinear preconditioner of a conjugate
 *	  gradient method over all factors (Winlaw, Hynes, Caterini and De
 *	  Sterck, arXiv:1508.03110).
 *
 * An iteration from the factors z (X and Y together) runs the engine's
 * sweep, which leaves zs = ALS(z).  The preconditioned gradient is
 * p = z - zs, the step the sweep took backwards, and the direction is
 * d = -p + beta d', with the Polak-Ribiere factor taken on the
 * preconditioned gradients alone, beta = p.(p - p') / p'.p', floored at
 * zero (primes: the previous iteration's).  The paper's factor uses the
 * true gradient g in the numerator and g'.p' below; on the synthetic sets
 * of the benchmark the form on p alone reached the same loss in as many
 * iterations or fewer, and it saves a pass over the ratings per iteration
 * (doc/training.md, "Acceleration").
 *
 * The line searched is zs + t d, from the sweep's result rather than from
 * z as in the paper (where the search is z + t d), as De Sterck's N-GMRES
 * searches from its preconditioned iterate.  On the 5M-rating benchmark
 * set this reached a lower loss at every iteration (f = 64 and 128), and
 * it costs less: L along the line is an exact quartic (src/core/accel.c)
 * whose constant term is L(zs), so the sweep skips its own loss pass, and
 * a step is kept exactly when it lowers L below the sweep's.  Its linear
 * coefficient is g.d at zs: a direction that does not descend there is
 * seen without the gradient, and the iteration keeps zs and restarts from
 * d = -p.  So an accelerated training never ends worse than the sweeps it
 * is made of, and every iteration's loss is at most the one before.
 *
 * The first iteration of a training is a plain sweep: from random factors
 * the step was measured to be 1 (nothing gained), and there is no
 * previous step to make a direction of.
 *
 * The vectors live in the engine (the CPU engine's workspace, the GPU's
 * memory); this file only decides, through the engine's operations.
 */
#include "postgres.h"

#include <math.h>

#include "wals_train.h"

/* The spare vectors: z, p and p' (in turns), and d of the text above. */
#define NCG_START		1
#define NCG_PRECOND_A	2
#define NCG_PRECOND_B	3
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
	ncg->first = true;
	ncg->restart = true;
	ncg->pp = 0;
	ncg->precond = NCG_PRECOND_A;
}

bool
wals_ncg_iterate(const WalsEngine *engine, void *state, WalsNcg *ncg,
				 double *loss, double *step, WalsFailure *failure)
{
	int			cur = ncg->precond == NCG_PRECOND_A ? NCG_PRECOND_B : NCG_PRECOND_A;
	double		pp;
	double		pp_old = 0;
	double		beta = 0;
	double		coef[WALS_LINE_TERMS];
	double		t;
	double		value;

	*step = 0;
	if (ncg->first)
	{
		ncg->first = false;
		return engine->iterate(state, loss, failure);
	}
	if (!engine->combine(state, NCG_START, 1, WALS_VEC_FACTORS, 0, WALS_VEC_FACTORS, failure) ||
		!engine->iterate(state, NULL, failure))
		return false;

	if (!engine->combine(state, cur, 1, NCG_START, -1, WALS_VEC_FACTORS, failure) ||
		!engine->dot(state, cur, cur, &pp, failure))
		return false;
	if (!ncg->restart && !engine->dot(state, cur, ncg->precond, &pp_old, failure))
		return false;
	if (!ncg->restart && ncg->pp > 0)
		beta = Max(0.0, (pp - pp_old) / ncg->pp);
	ncg->pp = pp;
	ncg->precond = cur;
	if (!engine->combine(state, NCG_DIRECTION, -1, cur, beta, NCG_DIRECTION, failure) ||
		!engine->line(state, WALS_VEC_FACTORS, NCG_DIRECTION, coef, failure))
		return false;
	*loss = coef[0];
	/* pp = 0: the sweep did not move, float noise is all that is left. */
	if (!(pp > 0) || !(coef[1] < 0) || !wals_quartic_min(coef, &t, &value) || !(t > 0) ||
		!(value < coef[0] - NCG_MIN_GAIN * fabs(coef[0])))
	{
		ncg->restart = true;
		return true;
	}
	if (!engine->combine(state, WALS_VEC_FACTORS, 1, WALS_VEC_FACTORS, t, NCG_DIRECTION, failure))
		return false;
	ncg->restart = false;
	*loss = value;
	*step = t;
	return true;
}
