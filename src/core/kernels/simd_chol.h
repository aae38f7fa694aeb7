/*
 * simd_chol.h
 *	  The Cholesky system solved, for any vector width: factorised left-looking
 *	  by panels of four rows, or in registers where it is one vector wide, then
 *	  the two substitutions.  Part of the template that simd_family.h puts
 *	  together once per instruction set.
 *
 * At f = 64 LAPACK's small-matrix path costs more in calls and copies than
 * in arithmetic, so the vector families factorise here rather than call
 * spotrf as the portable family does.
 */

/*
 * Rows kb..kb+3 of U, over the w vectors from column SIMD_W cs: A's rows
 * less the contributions of the finished rows above, accumulated in
 * registers (left-looking: each entry of U is stored once), then the four
 * rows finished one after the other.  Narrow chunks split the
 * accumulation over rows m into sets of partial sums, as many as the
 * accumulators allow: their chains of kb dependent FMAs would otherwise
 * set the pace.  The chunk that holds the diagonal comes first and records
 * the four pivots' inverses and the couplings between the four rows,
 * which the chunks right of it apply in the same order.  A pivot's inverse
 * replaces it on the diagonal, since the substitutions only ever divide
 * by it.  Rows past f are computed from row kb and not stored; reading up
 * to column kb + 3 stays inside the padded rows.  It stays one function of
 * about a hundred lines: its accumulators are one register tile that the
 * accumulation fills and the finishing reads, which a split would have to
 * hand over through memory.
 */
static SIMD_INLINE int
SIMD(chol_chunk) (float *A, int f, int kb, int cs, int first, float *inv,
				  float coup[4][4], const int w)
{
	int			fp = wals_pad(f);
	int			nr = f - kb < 4 ? f - kb : 4;
	const int	sets = SIMD_TILE / w > 1 ? SIMD_TILE / w : 1;
	V			part[SIMD_TILE][4][SIMD_TILE];
	V			(*acc)[SIMD_TILE] = part[0];
	int			m;
	int			g;
	int			r;
	int			q;
	int			c;

	SIMD_UNROLL
	for (g = 0; g < sets; g++)
		SIMD_UNROLL
		for (r = 0; r < 4; r++)
			SIMD_UNROLL
			for (c = 0; c < w; c++)
				part[g][r][c] = g > 0 ? vzero() :
					vld(A + (size_t) (kb + (r < nr ? r : 0)) * fp + SIMD_W * (cs + c));
	for (m = 0; m < kb; m += sets)
	{
		SIMD_UNROLL
		for (g = 0; g < sets; g++)
		{
			const float *um = A + (size_t) (m + g) * fp;
			V			b0 = vset1(um[kb]);
			V			b1 = vset1(um[kb + 1]);
			V			b2 = vset1(um[kb + 2]);
			V			b3 = vset1(um[kb + 3]);

			SIMD_UNROLL
			for (c = 0; c < w; c++)
			{
				V			u = vld(um + SIMD_W * (cs + c));

				part[g][0][c] = vfnma(b0, u, part[g][0][c]);
				part[g][1][c] = vfnma(b1, u, part[g][1][c]);
				part[g][2][c] = vfnma(b2, u, part[g][2][c]);
				part[g][3][c] = vfnma(b3, u, part[g][3][c]);
			}
		}
	}
	SIMD_UNROLL
	for (g = 1; g < sets; g++)
		SIMD_UNROLL
		for (r = 0; r < 4; r++)
			SIMD_UNROLL
			for (c = 0; c < w; c++)
				acc[r][c] = vadd(acc[r][c], part[g][r][c]);
	SIMD_UNROLL
	for (r = 0; r < 4; r++)
	{
		int			k = kb + r;
		V			s;

		if (r >= nr)
			break;
		if (first)
		{
			V			d = vlane(acc[r][k / SIMD_W - cs], k % SIMD_W);

			if (!wals_pivot_ok(vfirst(d)))
				return 0;
			s = vrsqrt(d);
			inv[r] = vfirst(s);
		}
		else
			s = vset1(inv[r]);
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			acc[r][c] = vmul(s, acc[r][c]);
		SIMD_UNROLL
		for (q = r + 1; q < 4; q++)
		{
			if (q >= nr)
				break;
			if (first)
			{
				s = vlane(acc[r][(kb + q) / SIMD_W - cs], (kb + q) % SIMD_W);
				coup[r][q] = vfirst(s);
			}
			else
				s = vset1(coup[r][q]);
			SIMD_UNROLL
			for (c = 0; c < w; c++)
				acc[q][c] = vfnma(s, acc[r][c], acc[q][c]);
		}
	}
	SIMD_UNROLL
	for (r = 0; r < 4; r++)
		SIMD_UNROLL
		for (c = 0; c < w; c++)
			if (r < nr)
				vst(A + (size_t) (kb + r) * fp + SIMD_W * (cs + c), acc[r][c]);
	if (first)
		for (r = 0; r < nr; r++)
			A[(size_t) (kb + r) * fp + kb + r] = inv[r];
	return 1;
}

/*
 * A = U^T U, U upper with inverted diagonal, by panels of four rows: f^3 / 6
 * multiply-adds, 11 billion at f = 4096, so each panel counts its own
 * towards the next poll.
 */
static SIMD_FN int
SIMD(chol_factor) (float *A, int f)
{
	int			np = wals_pad(f) / SIMD_W;
	int64_t		work = 0;
	int			kb;

	for (kb = 0; kb < f; kb += 4)
	{
		float		inv[4] = {0.0f};
		float		coup[4][4] = {{0.0f}};
		int			cs;

		for (cs = kb / SIMD_W; cs < np; cs += SIMD_TILE)
		{
			int			first = cs == kb / SIMD_W;
			int			ok = 0;

#define CHUNK(k) ok = SIMD(chol_chunk) (A, f, kb, cs, first, inv, coup, k)
			SIMD_DISPATCH(np - cs < SIMD_TILE ? np - cs : SIMD_TILE, SIMD_TILE, CHUNK);
#undef CHUNK
			if (!ok)
				return 0;
		}
		wals_poll_local(&work, (int64_t) 4 * (kb + 1) * (SIMD_W * np - kb));
	}
	wals_poll(work);
	return 1;
}

/*
 * U^T z = b forward with b in registers (nv a constant): each step takes
 * z_k from its lane of b and subtracts z_k times row k from what is left,
 * so the steps' chain is a lane broadcast, a multiply and an FMA.  z
 * replaces b.
 */
static SIMD_INLINE void
SIMD(forward_reg) (const float *A, int f, float *b, const int nv)
{
	int			fp = SIMD_W * nv;
	V			bv[SIMD_ONE];
	int			q;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		bv[c] = vld(b + SIMD_W * c);
	SIMD_UNROLL
	for (q = 0; q < nv; q++)
	{
		int			last = f - SIMD_W * q < SIMD_W ? f - SIMD_W * q : SIMD_W;
		int			kk;

		for (kk = 0; kk < last; kk++)
		{
			const float *rk = A + (size_t) (SIMD_W * q + kk) * fp;
			V			t = vmul(vlane(bv[q], kk), vset1(rk[SIMD_W * q + kk]));

			b[SIMD_W * q + kk] = vfirst(t);
			SIMD_UNROLL
			for (c = q; c < nv; c++)
				bv[c] = vfnma(t, vld(rk + SIMD_W * c), bv[c]);
		}
	}
}

/*
 * U x = z backward with x in registers (nv a constant), four rows at a
 * time: their dot products with the finished part of x share one set of
 * horizontal sums, and only the 4 x 4 triangle between them is solved one
 * row after the other.  The lanes up to the group's last row are dropped:
 * they hold no x yet, and U's lower triangle holds garbage.
 */
static SIMD_INLINE void
SIMD(backward_reg) (const float *A, int f, const float *z, float *x,
					const int nv)
{
	int			fp = SIMD_W * nv;
	V			xv[SIMD_ONE];
	int			q;
	int			c;

	SIMD_UNROLL
	for (c = 0; c < nv; c++)
		xv[c] = vzero();
	SIMD_UNROLL
	for (q = nv - 1; q >= 0; q--)
	{
		int			k0;

		for (k0 = SIMD_W * q + SIMD_W - 4; k0 >= SIMD_W * q; k0 -= 4)
		{
			const float *u[4];
			V			d[4];
			float		sv[4];
			float		xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			int			nr;
			int			r;
			int			j;

			if (k0 >= f)
				continue;
			nr = f - k0 < 4 ? f - k0 : 4;
			SIMD_UNROLL
			for (r = 0; r < 4; r++)
			{
				u[r] = A + (size_t) (k0 + (r < nr ? r : 0)) * fp;
				d[r] = vmul(vkeep_from(vld(u[r] + SIMD_W * q), k0 % SIMD_W + 4), xv[q]);
				SIMD_UNROLL
				for (c = q + 1; c < nv; c++)
					d[r] = vfma(vld(u[r] + SIMD_W * c), xv[c], d[r]);
			}
			vsum4(d[0], d[1], d[2], d[3], sv);
			SIMD_UNROLL
			for (r = 3; r >= 0; r--)
			{
				float		acc;

				if (r >= nr)
					continue;
				acc = z[k0 + r] - sv[r];
				SIMD_UNROLL
				for (j = r + 1; j < 4; j++)
					if (j < nr)
						acc -= u[r][k0 + j] * xs[j];
				xs[r] = acc * u[r][k0 + r];
				x[k0 + r] = xs[r];
			}
			xv[q] = vput(xv[q], k0 % SIMD_W, nr, xs);
		}
	}
}

/*
 * The same substitutions for wider systems, on b in memory: forward as row
 * operations on b (whole vectors: the lanes at or left of k are spent, and
 * z goes to x), backward as dot products with the finished part of x, kept
 * aligned in b.  The spent lanes of b may hold anything, so the products,
 * not U's entries, are dropped there.
 */
static SIMD_FN void
SIMD(substitute_mem) (const float *A, int f, float *b, float *x)
{
	int			fp = wals_pad(f);
	int			np = fp / SIMD_W;
	int			k;
	int			c;

	for (k = 0; k < f; k++)
	{
		const float *rk = A + (size_t) k * fp;
		float		z = b[k] * rk[k];
		V			t = vset1(z);

		x[k] = z;
		for (c = k / SIMD_W; c < np; c++)
			vst(b + SIMD_W * c, vfnma(t, vld(rk + SIMD_W * c), vld(b + SIMD_W * c)));
	}
	for (k = f - 1; k >= 0; k--)
	{
		const float *rk = A + (size_t) k * fp;
		V			s = vzero();

		for (c = k / SIMD_W; c < np; c++)
			s = vadd(s, vkeep_from(vmul(vld(rk + SIMD_W * c), vld(b + SIMD_W * c)),
								   k + 1 - SIMD_W * c));
		b[k] = x[k] = (x[k] - vreduce(s)) * rk[k];
	}
}

/*
 * chol_factor for systems of one vector (n = f <= SIMD_W, a constant),
 * right-looking with every row in a register: the chain of dependent
 * steps from one pivot to the next is a lane broadcast, the inverse
 * square root, a multiply, a broadcast and one FMA, without the panels'
 * trips through memory and their 4 x 4 couplings.  The subspace solver's
 * blocks of 16 make this its most frequent call; a solve of 16 takes
 * 350 ns instead of 450 on AVX-512.
 */
static SIMD_INLINE int
SIMD(chol_factor_one) (float *A, int f, const int n)
{
	int			fp = wals_pad(f);
	V			a[SIMD_W];
	float		inv[SIMD_W];
	int			k;
	int			j;

	SIMD_UNROLL
	for (k = 0; k < n; k++)
		a[k] = vld(A + (size_t) k * fp);
	SIMD_UNROLL
	for (k = 0; k < n; k++)
	{
		V			d = vlane(a[k], k);
		V			s;

		if (!wals_pivot_ok(vfirst(d)))
			return 0;
		s = vrsqrt(d);
		inv[k] = vfirst(s);
		a[k] = vmul(a[k], s);
		SIMD_UNROLL
		for (j = k + 1; j < n; j++)
			a[j] = vfnma(vlane(a[k], j), a[k], a[j]);
	}
	SIMD_UNROLL
	for (k = 0; k < n; k++)
	{
		vst(A + (size_t) k * fp, a[k]);
		A[(size_t) k * fp + k] = inv[k];
	}
	return 1;
}

static SIMD_FN int
SIMD(chol_solve) (float *A, int f, float *b, float *x)
{
	int			np = wals_pad(f) / SIMD_W;
	int			ok = 0;

#define FACTOR_ONE(k) ok = SIMD(chol_factor_one) (A, f, k)
	if (f <= SIMD_W)
		SIMD_DISPATCH(f, SIMD_W, FACTOR_ONE);
	else
		ok = SIMD(chol_factor) (A, f);
#undef FACTOR_ONE
	if (!ok)
		return 0;
#define SUBST(k) do { \
		SIMD(forward_reg) (A, f, b, k); \
		SIMD(backward_reg) (A, f, b, x, k); \
	} while (0)
	if (np <= SIMD_ONE)
		SIMD_DISPATCH(np, SIMD_ONE, SUBST);
	else
		SIMD(substitute_mem) (A, f, b, x);
#undef SUBST
	return 1;
}
